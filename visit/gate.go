package visit

import (
	"context"
	"sync"
)

// gate bounds the requests of one endpoint in flight by how many visits
// its server serves at once, learned from its answers: a visitor slot is
// a count, and a 429 says the server serves those in flight besides it,
// and no more. A stream holds its place for as long as it lasts (which an
// attempt's permit of a retries.Limiter does not: it ends with the
// response's header); a page, until it is read.
//
// The limit starts at one and grows by one with each request the server
// takes (its 200's header), until the first 429 or the endpoint's slices.
// Then a 429 sets it to those in flight besides the request refused, and
// a probe for a slot freed since (a place of one more) comes after
// 2×limit requests taken without a 429, then after twice as many each
// time a request at the limit is refused, and after 2×limit again once
// the server has taken limit requests at the limit in a row (it took the
// probe for good, not by a moment's overlap of one ending and one
// beginning).
type gate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	most     int  // the limit's ceiling: the endpoint's slices
	slow     bool // slow start: no 429 yet
	taken    int  // requests taken since the limit last changed
	atLimit  int  // of them, sent at the limit
	probed   bool // the limit grew by a probe since the last 429
	probe    int  // taken requests before the next probe, per place
	wake     chan struct{}
}

func newGate(most int) *gate {
	return &gate{limit: 1, most: most, slow: true, probe: 2, wake: make(chan struct{})}
}

// crowded reports whether the server serves fewer visits at once than
// the endpoint has slices, which then take turns: a slice asks for a page
// rather than a stream, which would hold its place to the slice's end.
func (g *gate) crowded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit < g.most && !g.slow
}

// enter waits for a place, or for ctx to end, and returns the requests
// in flight with it, itself included.
func (g *gate) enter(ctx context.Context) (int, error) {
	for {
		g.mu.Lock()
		if g.inflight < g.limit {
			g.inflight++
			n := g.inflight
			g.mu.Unlock()
			return n, nil
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// took says the server took a request sent when n were in flight with
// it, itself included (it answered 200).
func (g *gate) took(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n >= g.limit && g.probed {
		if g.atLimit++; g.atLimit >= g.limit {
			g.probe = 2
		}
	}
	if g.limit >= g.most {
		return
	}
	if g.taken++; g.slow || g.taken >= g.probe*g.limit {
		g.limit, g.taken, g.atLimit, g.probed = g.limit+1, 0, 0, !g.slow
		g.wakeAll()
	}
}

// leave gives a place back; busy says the server refused the request
// with a 429, sent when n were in flight with it: the server serves n−1.
func (g *gate) leave(busy bool, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if busy {
		if !g.slow && n >= g.limit {
			g.probe = min(2*g.probe, 64)
		}
		g.slow = false
		g.limit, g.taken, g.atLimit, g.probed = max(1, min(g.limit, n-1)), 0, 0, false
	}
	g.wakeAll()
}

func (g *gate) wakeAll() {
	close(g.wake)
	g.wake = make(chan struct{})
}
