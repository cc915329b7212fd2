package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/internal/ledger"
	"github.com/seed32e55400/retries/visit"
)

// CopyOf is what a copy is of: a resume refuses a checkpoint made for
// another, since its continuation tokens and its count mean nothing there.
type CopyOf struct {
	Cluster, Selection, FieldSet string
	// From and To are the endpoints of the source and the destination, as
	// the checkpoint records them: without passwords, in a fixed order.
	From, To []string
	// Share is the part of the copy this one is, when it is split across
	// processes (visit.Config.Share): each share has its own checkpoint.
	Share visit.Share
}

// copyState is the state of a copy's checkpoint (kind "copy"): what is
// copied, and the visit's progress past every document the destination
// acknowledged (or that went to the failed file).
type copyState struct {
	Version   int            `json:"version"`
	Cluster   string         `json:"cluster"`
	Selection string         `json:"selection,omitempty"`
	FieldSet  string         `json:"field_set,omitempty"`
	From      []string       `json:"from,omitempty"` // none in a checkpoint of an older version
	To        []string       `json:"to,omitempty"`
	Documents int64          `json:"documents"` // done before this point: acknowledged, or written to the failed file
	Progress  visit.Progress `json:"progress"`
	Complete  bool           `json:"complete,omitempty"`
	Share     string         `json:"share,omitempty"` // I/W; none for the whole copy
}

// copyQueued bounds the documents visited and not yet taken by the feed,
// and copySaveEvery is the time between checkpoints: together with the
// visit's pages they bound what a copy killed visits again (with 512
// queued and pages of 128, a copy at 2 000 documents a second visited
// 1.27 times the corpus over two kills at most).
const (
	copyQueued    = 512
	copySaveEvery = 250 * time.Millisecond
)

// A Copier copies the documents a [visit.Client] visits to a
// [feed.Client], as puts, and with a checkpoint file resumes after any
// end, a SIGKILL included, with no document lost and few visited again:
// the checkpoint moves only past documents the destination acknowledged
// (or that went to the failed file), a few times a second.
//
// The visit should be made with visit.Config.Pages, so that the feed sets
// the pace: a slice asks for its next page only once the last is taken,
// and the source visits little ahead of what the destination
// acknowledged. The feed must be made with feed.Config.Resumable when the
// copy has a checkpoint: what it did not send is visited again.
type Copier struct {
	led     *ledger.Ledger
	path    string
	hold    *hold
	start   Start
	visited atomic.Int64
	acked   atomic.Int64
	slices  atomic.Int64 // done, as the last page handed out says
	others  int          // the other shares' slices, which the progress holds as done

	mu      sync.Mutex
	changed *sync.Cond
	failed  *os.File
	queues  map[int][]visit.Document // per slice: documents to feed, in order
	ords    map[int][]int64          // and their ordinals
	ring    []int                    // the slices with documents queued, in turn
	queued  int
	next    int64 // the next ordinal
	marks   []copyMark
	ended   bool // the visit ended
	vdone   bool // and was complete
	st      copyState
}

// copyMark is a page's progress, which holds once the elements up to
// last are done.
type copyMark struct {
	last int64
	prog visit.Progress
}

// OpenCopy returns a Copier for the copy of, in slices slices, with its
// checkpoint at path (none for ""): resumed from there if the file exists
// and is of this copy, or new. It refuses a checkpoint of another kind,
// of another copy, or of a copy in other slices. With a checkpoint, the
// Copier holds it until Close: another run that opens it meanwhile gets
// an error wrapping ErrHeld.
func OpenCopy(path string, of CopyOf, slices int) (*Copier, error) {
	st := copyState{Version: 1, Cluster: of.Cluster, Selection: of.Selection, FieldSet: of.FieldSet, From: of.From, To: of.To, Share: shareOf(of.Share)}
	c := &Copier{led: ledger.New(nil), path: path, queues: map[int][]visit.Document{}, ords: map[int][]int64{}}
	c.changed = sync.NewCond(&c.mu)
	c.others = slices - of.Share.Count(slices)
	if path != "" {
		h, ck, found, err := holdAndRead(path, "copy")
		if err != nil {
			return nil, err
		}
		if found {
			st, err = readCopy(ck, path, st)
			if err == nil {
				err = checkSlices(path, "copy", st.Progress, slices)
			}
			if err == nil {
				err = checkShare(path, st.Share, shareOf(of.Share))
			}
			if err != nil {
				h.release()
				return nil, err
			}
		}
		c.hold = h
		c.start.Resumed, c.start.Complete = found, found && st.Complete
	}
	c.st = st
	c.start.Before = st.Documents // 0 for a new copy
	return c, nil
}

// readCopy reads c, the checkpoint at path, for the copy that st
// describes.
func readCopy(c envelope, path string, st copyState) (copyState, error) {
	var prev copyState
	if err := c.Decode("copy", &prev); err != nil {
		return st, err
	}
	switch {
	case prev.Version != 1:
		return st, fmt.Errorf("%s is not a checkpoint of a copy", path)
	case prev.Cluster != st.Cluster || prev.Selection != st.Selection || prev.FieldSet != st.FieldSet:
		return st, fmt.Errorf("%s was made for another copy (the cluster, the selection or the field set differ): remove it to copy again", path)
	case prev.From != nil && !slices.Equal(prev.From, st.From):
		return st, fmt.Errorf("%s was made for a copy from other endpoints: its continuation tokens are of another Vespa; give the source it had, or remove it to copy again", path)
	case prev.To != nil && !slices.Equal(prev.To, st.To):
		return st, fmt.Errorf("%s was made for a copy to other endpoints: the documents copied before went there, and the new destination would never get them; give the destination it had, or remove it to copy again", path)
	}
	prev.From, prev.To = st.From, st.To
	return prev, nil
}

// Start returns what OpenCopy found at the checkpoint.
func (c *Copier) Start() Start { return c.start }

// Close lets the checkpoint go, for another run to take up.
func (c *Copier) Close() error { return c.hold.release() }

// CopyStats are a copy's counts.
type CopyStats struct {
	// Visited and Acknowledged are the documents this run visited, and of
	// them those the destination acknowledged.
	Visited, Acknowledged int64
	// Before are the documents done before the copy resumed, and Done
	// those the checkpoint counts done (acknowledged, or written to the
	// failed file), Before included.
	Before, Done int64
	// SlicesDone are the slices of the copy (of its share, with one)
	// visited to their end, as the last page visited says.
	SlicesDone int
}

// Stats returns the copy's counts so far.
func (c *Copier) Stats() CopyStats {
	c.mu.Lock()
	done := c.st.Documents
	c.mu.Unlock()
	return CopyStats{Visited: c.visited.Load(), Acknowledged: c.acked.Load(), Before: c.start.Before, Done: done, SlicesDone: int(c.slices.Load())}
}

// CopyResult is how a copy ended.
type CopyResult struct {
	// Report is the destination feed's.
	Report feed.Report
	// Visit is how the visit ended: nil when every slice was visited, or
	// the visit's error (context.Canceled when the feed stopped it).
	Visit error
	// Checkpoint is the error of the last write of the checkpoint, if
	// any: it may then be behind the copy.
	Checkpoint error
}

// Complete reports whether every document was visited and acknowledged
// (or written to the failed file), and the checkpoint says so.
func (r CopyResult) Complete() bool {
	return r.Visit == nil && r.Report.Complete() && r.Checkpoint == nil
}

// Run copies what from visits to to, from where the checkpoint left off,
// until every slice is visited and every document is acknowledged or
// reported, or ctx ends, or either side stops; the checkpoint is kept a
// few times a second and written last when Run returns. failed, if not
// nil, is the file to's feed.Config.Failed writes to: it is synced before
// each checkpoint that covers what it holds, and a document written there
// counts as done. Run returns an error only when the checkpoint cannot be
// written at the start; how the copy ended is in the CopyResult.
//
// A Copier runs once.
func (c *Copier) Run(ctx context.Context, from *visit.Client, to *feed.Client, failed *os.File) (CopyResult, error) {
	c.mu.Lock()
	c.failed = failed
	prog := c.st.Progress
	c.mu.Unlock()
	if err := c.save(); err != nil {
		return CopyResult{}, err
	}
	vctx, stopVisit := context.WithCancel(ctx)
	defer stopVisit()
	// The visit ends when the feed stops, whatever stopped it: a page
	// waiting for room in the queue is woken, as nothing takes from the
	// queue any more.
	defer context.AfterFunc(vctx, c.end)()
	visited := make(chan error, 1)
	go func() {
		p, err := from.Visit(vctx, prog, c.page)
		c.visitDone(p, err)
		visited <- err
	}()
	sctx, stopSaving := context.WithCancel(context.Background())
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		_ = ledger.Loop{Every: copySaveEvery, Commit: func(context.Context) error { return c.save() }}.Run(sctx) // the last save says
	}()
	_ = to.Feed(ctx, c.ops(vctx), c.done) // the report says what the error would
	stopVisit()
	verr := <-visited
	stopSaving()
	<-saved
	return CopyResult{Report: to.Report(), Visit: verr, Checkpoint: c.save()}, nil
}

// page is the visit's: it queues the page's documents, waiting while
// copyQueued are queued, and notes its progress.
func (c *Copier) page(pg visit.Page) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.queued >= copyQueued && !c.ended {
		c.changed.Wait()
	}
	if c.ended {
		return context.Canceled
	}
	if len(pg.Documents) > 0 && len(c.queues[pg.Slice]) == 0 {
		c.ring = append(c.ring, pg.Slice)
	}
	for _, d := range pg.Documents {
		ord := c.led.Add(c.next, 0)
		c.next++
		c.queues[pg.Slice] = append(c.queues[pg.Slice], d)
		c.ords[pg.Slice] = append(c.ords[pg.Slice], ord)
	}
	c.queued += len(pg.Documents)
	c.visited.Add(int64(len(pg.Documents)))
	c.slices.Store(int64(pg.Progress.SlicesDone() - c.others))
	c.marks = append(c.marks, copyMark{last: c.next - 1, prog: pg.Progress})
	c.changed.Broadcast()
	return nil
}

// visitDone records the end of the visit.
func (c *Copier) visitDone(p visit.Progress, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended, c.vdone = true, err == nil && p.Complete()
	c.changed.Broadcast()
}

// end ends the copy's queue: a page waiting for room returns, and ops
// yields no more once ctx has ended.
func (c *Copier) end() {
	c.mu.Lock()
	c.ended = true
	c.changed.Broadcast()
	c.mu.Unlock()
}

// ops yields the documents queued as puts, one slice's after another's
// in turn, until the visit has ended and none is left, or ctx ends (ctx
// must be the one whose end calls c.end).
func (c *Copier) ops(ctx context.Context) iter.Seq2[feed.Operation, error] {
	return func(yield func(feed.Operation, error) bool) {
		for {
			c.mu.Lock()
			for len(c.ring) == 0 && !c.ended {
				c.changed.Wait()
			}
			if len(c.ring) == 0 || ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			s := c.ring[0]
			d, ord := c.queues[s][0], c.ords[s][0]
			c.queues[s], c.ords[s] = c.queues[s][1:], c.ords[s][1:]
			c.ring = c.ring[1:]
			if len(c.queues[s]) > 0 {
				c.ring = append(c.ring, s)
			} else {
				delete(c.queues, s)
				delete(c.ords, s)
			}
			c.queued--
			c.changed.Broadcast()
			c.mu.Unlock()
			op := feed.Operation{Kind: feed.Put, ID: d.ID, Fields: fieldsOrEmpty(d.Fields), Tag: ord}
			if !yield(op, nil) {
				return
			}
		}
	}
}

// fieldsOrEmpty returns the fields of a document, or {} for none.
func fieldsOrEmpty(f json.RawMessage) json.RawMessage {
	if len(f) == 0 {
		return json.RawMessage("{}")
	}
	return f
}

// done is the feed's: a document acknowledged, or written to the failed
// file, is done; one not sent, or failed without a failed file, holds the
// checkpoint before it, so that a resumed copy sends it again.
func (c *Copier) done(o feed.Operation, _ feed.Result, err error) {
	ord, ok := o.Tag.(int64)
	if !ok {
		return
	}
	var fe *feed.Error
	switch {
	case err == nil:
		c.acked.Add(1)
	case c.failed != nil && errors.As(err, &fe) && !errors.Is(err, feed.ErrNotSent) && !fe.Unknown:
	default:
		return
	}
	c.led.Done(ord)
}

// save moves the checkpoint to the last page whose documents, and those
// of every page before it, are done, and writes it: the failed file
// synced first, then the checkpoint whole (writeEnvelope). It writes it
// unchanged too: a few times a second is cheap, and a test sees each
// save.
func (c *Copier) save() error {
	s := c.led.Snapshot()
	c.mu.Lock()
	for len(c.marks) > 0 {
		m := c.marks[0]
		if m.last >= 0 && !(m.last < s.Ord || (s.AllDone && m.last <= s.Ord)) {
			break
		}
		c.st.Progress, c.st.Documents = m.prog, c.start.Before+m.last+1
		c.marks = c.marks[1:]
	}
	if c.ended && c.vdone && len(c.marks) == 0 && c.st.Progress.Complete() {
		c.st.Complete = true
	}
	st, failed := c.st, c.failed
	c.mu.Unlock()
	if c.path == "" {
		return nil
	}
	if failed != nil {
		if err := failed.Sync(); err != nil {
			return fmt.Errorf("the failed file: %v", err)
		}
	}
	return writeEnvelope(c.path, "copy", st)
}
