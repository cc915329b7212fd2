package visit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Visit visits the slices from from on, each as a series of requests,
// and calls page with what each slice reads, one call at a time, on the
// goroutine of Visit: the progress a Page carries covers its documents
// and those of every page before it. It returns when every slice is done,
// when page returns an error (that error), when a request is refused
// (*StatusError) or a slice gets nothing for longer than MaxOutage, or
// when ctx ends; with the progress covering every page that page accepted.
func (c *Client) Visit(ctx context.Context, from Progress, page func(Page) error) (Progress, error) {
	n, share := c.cfg.Slices, c.cfg.Share
	switch {
	case from.Slices == 0:
		from = Progress{Slices: n, Tokens: make([]string, n), Done: make([]bool, n)}
		for i := range n {
			from.Done[i] = !share.Has(i) // another share's
		}
	case from.Slices != n || len(from.Tokens) != n || len(from.Done) != n || (from.Seen != nil && len(from.Seen) != n):
		return from, fmt.Errorf("visit: the progress is of %d slices, not %d", from.Slices, n)
	}
	for i := range n {
		if !share.Has(i) && !from.Done[i] {
			return from, fmt.Errorf("visit: the progress is not of share %s: slice %d, another share's, is not done", share, i)
		}
	}
	from = from.clone()
	if from.Seen == nil {
		from.Seen = make([][]string, n)
	}
	prog := from.clone()
	c.heard.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type result struct {
		slice int
		docs  []Document
		mark  mark
		ack   chan bool // true: go on
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for i := range n {
		if prog.Done[i] {
			continue
		}
		k := i // the slice's turn among the share's, which go round the endpoints
		if share.Of > 1 {
			k = i / share.Of
		}
		s := newSlice(i, c.endpoints[k%len(c.endpoints)], from.Tokens[i], from.Seen[i], &c.heard)
		wg.Go(func() {
			err := c.run(ctx, s, func(docs []Document, m mark) bool {
				r := result{slice: i, docs: docs, mark: m, ack: make(chan bool, 1)}
				select {
				case results <- r:
				case <-ctx.Done():
					return false
				}
				return <-r.ack
			})
			if err != nil && !errors.Is(err, errStopped) {
				cancel(err)
			}
		})
	}
	go func() { wg.Wait(); close(results) }()
	var err error
	for r := range results {
		if err != nil {
			r.ack <- false
			continue
		}
		i := r.slice
		prog.Tokens[i], prog.Done[i], prog.Seen[i] = r.mark.token, r.mark.done, r.mark.seen
		if err = page(Page{Slice: i, Documents: r.docs, Progress: prog.tidy(), Processed: r.mark.processed}); err != nil {
			prog.Tokens[i], prog.Done[i], prog.Seen[i] = from.Tokens[i], from.Done[i], from.Seen[i]
			cancel(err)
			r.ack <- false
			continue
		}
		from.Tokens[i], from.Done[i], from.Seen[i] = r.mark.token, r.mark.done, r.mark.seen
		r.ack <- true
	}
	if err != nil {
		return from.tidy(), err
	}
	if cause := context.Cause(ctx); cause != nil && !prog.Complete() {
		return from.tidy(), cause
	}
	return from.tidy(), nil
}

// tidy returns a copy of p with Seen nil when it holds no id.
func (p Progress) tidy() Progress {
	q := p.clone()
	for _, s := range q.Seen {
		if len(s) > 0 {
			return q
		}
	}
	q.Seen = nil
	return q
}

// errStopped ends a slice whose pages are no longer wanted.
var errStopped = errors.New("visit: stopped")

// mark is where a slice stands after the documents handed out with it.
type mark struct {
	token string
	done  bool
	seen  []string // the ids read since the token before the last one
	// processed is, with Config.Process, the documents the server
	// processed for the page handed out with it.
	processed int
}

// slice is one slice's state as it reads.
type slice struct {
	id    int
	ep    *endpoint
	token string
	done  bool
	// older are the ids read between the token before the last one and
	// the last one (at a resume, the progress's Seen); recent, those read
	// since the last one. A visit from token may send them again: they
	// are dropped when it does.
	older    map[string]struct{}
	olderL   []string
	recent   map[string]struct{}
	recentL  []string
	heard    atomic.Int64  // when the slice last read something new, as UnixNano, less the time it waited at the gate since
	anyHeard *atomic.Int64 // when any slice of the visit did (Client.heard)
	pieces   int           // new documents and tokens that moved the slice, read
}

func newSlice(id int, ep *endpoint, token string, seen []string, anyHeard *atomic.Int64) *slice {
	s := &slice{id: id, ep: ep, token: token, recent: map[string]struct{}{}, anyHeard: anyHeard}
	s.older, s.olderL = set(seen), seen
	return s
}

func set(ids []string) map[string]struct{} {
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return m
}

// read records the id of a document read, and reports whether it is new:
// neither read since the token before the last one, nor in the Seen the
// slice resumed with (a request taken up after a cut sends them again).
// An id read again counts as read since the last token too: the next
// token may not cover it, and then a later resume must drop it again.
func (s *slice) read(id string) bool {
	if _, again := s.recent[id]; again {
		return false
	}
	s.recent[id] = struct{}{}
	s.recentL = append(s.recentL, id)
	_, again := s.older[id]
	return !again
}

// roll makes the ids read since the last token the older ones.
func (s *slice) roll(keep bool) {
	if keep {
		s.older, s.olderL = s.recent, s.recentL
	} else {
		s.older, s.olderL = nil, nil
	}
	s.recent, s.recentL = map[string]struct{}{}, nil
}

// tokenRead moves the slice to a token read from a stream: what was read
// before the last token is now covered by this one.
func (s *slice) tokenRead(token string) {
	switch {
	case token == "":
		s.token, s.done = "", true
		s.roll(false)
	case token != s.token: // a token equal to the last covers nothing more
		s.token = token
		s.roll(true)
	}
}

// pageRead moves the slice past a page, whose token covers all of it. A
// page that gives back the token it was asked from covers nothing more:
// what was read under that token is kept, and dropped if read again.
func (s *slice) pageRead(token string) {
	if token != "" && token == s.token {
		return
	}
	s.token, s.done = token, token == ""
	s.roll(false)
}

func (s *slice) mark() mark {
	var seen []string
	if len(s.olderL)+len(s.recentL) > 0 {
		seen = append(make([]string, 0, len(s.olderL)+len(s.recentL)), s.olderL...)
		for _, id := range s.recentL {
			if _, dup := s.older[id]; !dup {
				seen = append(seen, id)
			}
		}
	}
	return mark{token: s.token, done: s.done, seen: seen}
}

// progressed notes something new read: a document not read before, or a
// token that moves the slice. A document read again, or the same token
// again, is no progress: a server that answers the same page or token for
// ever is out, however fast it answers.
func (s *slice) progressed() {
	now := time.Now().UnixNano()
	s.heard.Store(now)
	s.anyHeard.Store(now)
	s.pieces++
}

// excuse takes the time d that the slice waited for a place at the gate
// off its outage: the server said it was busy, not that it was out.
func (s *slice) excuse(d time.Duration) { s.heard.Add(int64(d)) }

// run reads slice s to its end, handing out what it reads through emit,
// which returns false when no more is wanted. A request that fails is
// made again, from where the slice stands, until the slice has read
// nothing for MaxOutage.
func (c *Client) run(ctx context.Context, s *slice, emit func([]Document, mark) bool) error {
	s.heard.Store(time.Now().UnixNano())
	for !s.done {
		pieces := s.pieces
		err := c.request(ctx, s, emit)
		progressed := s.pieces > pieces
		if err == nil && !progressed && !s.done {
			err = errNoProgress
			c.counts.failed.Add(1)
		}
		var se *StatusError
		switch {
		case err == nil:
			c.health.ok()
			continue
		case errors.Is(err, errCut) && progressed:
			c.health.ok()
			continue // a stream cut short after it brought something: on from there at once
		case errors.Is(err, errBusy): // the gate holds the slice back from now on
			// Waiting at the gate is no outage while other slices read;
			// while none does, it is one.
			if errors.Is(err, errAlone) {
				c.health.failed(err, c.cfg.MaxOutage)
			}
			if c.cfg.MaxOutage > 0 && time.Since(time.Unix(0, s.anyHeard.Load())) >= c.cfg.MaxOutage {
				return fmt.Errorf("%w (%v, no slice read anything: every request was answered 429, the server served no visit): %w", ErrMaxOutage, c.cfg.MaxOutage, &shortError{err})
			}
			if sleep(ctx, time.Duration(100+rand.IntN(200))*time.Millisecond) != nil {
				return context.Cause(ctx)
			}
			continue
		case errors.Is(err, errStopped), ctx.Err() != nil:
			return err
		case errors.As(err, &se):
			c.health.failed(err, c.cfg.MaxOutage)
			return err
		}
		if progressed {
			c.health.ok() // what it read before failing is new
		}
		c.health.failed(err, c.cfg.MaxOutage)
		if c.cfg.MaxOutage > 0 && time.Since(time.Unix(0, s.heard.Load())) >= c.cfg.MaxOutage {
			return fmt.Errorf("%w (%v, slice %d): %w", ErrMaxOutage, c.cfg.MaxOutage, s.id, &shortError{err})
		}
		if sleep(ctx, time.Duration(500+rand.IntN(500))*time.Millisecond) != nil {
			return context.Cause(ctx)
		}
	}
	return nil
}

// sleep waits for d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNoProgress is a request answered well that read nothing new: the
// same token, documents read before. It is retried as a failure, after a
// wait, for at most MaxOutage.
var errNoProgress = errors.New("visit: the server answered nothing new (the same continuation token, documents read before)")

// errQuiet ends a request of a slice that has read nothing for MaxOutage.
var errQuiet = errors.New("visit: nothing read for -max-outage")

// watch cancels ctx with errQuiet once s has read nothing for MaxOutage,
// until the returned stop is called.
func (c *Client) watch(ctx context.Context, s *slice) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if c.cfg.MaxOutage <= 0 {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(c.cfg.MaxOutage)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			left := c.cfg.MaxOutage - time.Since(time.Unix(0, s.heard.Load()))
			if left <= 0 {
				cancel(errQuiet)
				return
			}
			t.Reset(left)
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
