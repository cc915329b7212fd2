package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
)

// copyFlags are the flags of the copy command: the source's, and the
// feed's for the destination.
type copyFlags struct {
	to                           feedFlags // -to is its -url
	from                         urlsFlag
	cluster, selection, fieldSet string
	slices                       int
	checkpoint                   string
	fromHeader                   headerFlag
	fromHeaderFile               string
	fromCert, fromKey, fromCA    string
}

// addCopyFlags defines the copy command's flags on fs.
func addCopyFlags(fs *flag.FlagSet, f *copyFlags) {
	fs.Var(&f.from, "from", "the source's document/v1 endpoint `URL` (required); repeat it for several, the slices spread over them")
	fs.Var(&f.to.urls, "to", "the destination's document/v1 endpoint `URL` (required); repeat it for several, each operation going to the least loaded")
	fs.StringVar(&f.cluster, "cluster", "", "the source's content `CLUSTER` to copy (required)")
	fs.StringVar(&f.selection, "selection", "", "copy the documents that match the document selection `EXPR`")
	fs.StringVar(&f.fieldSet, "field-set", "", "the field set `FS` of each document copied, such as music:[document]")
	fs.IntVar(&f.slices, "slices", 8, "split the source into `N` slices, visited at once as it allows (fixed for a -checkpoint)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the copy is, past the documents the destination acknowledged, and resume from it when it exists")
	fs.Var(&f.fromHeader, "from-header", "send the header `'Name: value'` with every request to the source (repeatable); never printed")
	fs.StringVar(&f.fromHeaderFile, "from-header-file", "", "read the source's headers from `FILE`, one 'Name: value' a line; never printed")
	fs.StringVar(&f.fromCert, "from-cert", "", "the client certificate for the source, a PEM `FILE`, for mutual TLS on https URLs")
	fs.StringVar(&f.fromKey, "from-key", "", "the private key of -from-cert, a PEM `FILE`")
	fs.StringVar(&f.fromCA, "from-ca", "", "trust the CA certificates of this PEM `FILE` for the source instead of the system's")
	addSendFlags(fs, &f.to)
	fs.Lookup("max-outage").Usage = "end the copy when the source or the destination has been out for this long; 0: wait for ever"
}

// copyCheckpoint is what -checkpoint FILE of a copy holds: what is
// copied, and the visit's progress past every document the destination
// acknowledged (or that went to -failed).
type copyCheckpoint struct {
	Version   int            `json:"version"`
	Cluster   string         `json:"cluster"`
	Selection string         `json:"selection,omitempty"`
	FieldSet  string         `json:"field_set,omitempty"`
	From      []string       `json:"from,omitempty"` // the endpoints; none in a checkpoint of an older version
	To        []string       `json:"to,omitempty"`
	Documents int64          `json:"documents"` // done before this point: acknowledged, or written to -failed
	Progress  visit.Progress `json:"progress"`
	Complete  bool           `json:"complete,omitempty"`
}

// runCopy is the copy command.
func runCopy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := newFlagSet("copy")
	var f copyFlags
	addCopyFlags(fset, &f)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	switch {
	case f.fromHeader.check() != nil:
		return usageErrorf("copy: %v", f.fromHeader.check())
	case len(f.from) == 0 || len(f.to.urls) == 0 || f.cluster == "":
		return usageErrorf("copy: -from, -to and -cluster are required")
	case len(pos) > 0:
		return usageErrorf("copy: unexpected argument %q", pos[0])
	case f.slices < 1 || f.slices > 4096:
		return usageErrorf("copy: -slices %d: want 1 to 4096", f.slices)
	case f.to.failed != "" && f.checkpoint != "" && sameFile(f.checkpoint, f.to.failed):
		return usageErrorf("copy: -checkpoint and -failed name the same file")
	}
	if err := f.to.check([]string{"-"}); err != nil {
		return err
	}
	stderr = &syncWriter{w: stderr} // the visit's log, the feed's and the progress write at once
	cfg, err := f.to.config(stderr)
	if err != nil {
		return err
	}
	cfg.LogPrefix = "retries copy: the destination: "
	srcTLS, err := feedTLS(f.fromCert, f.fromKey, f.fromCA)
	if err != nil {
		return setupErrorf("copy: -from-cert, -from-key, -from-ca: %v", err)
	}
	if f.fromHeaderFile != "" {
		if err := readHeaderFile(f.fromHeaderFile, &f.fromHeader); err != nil {
			return setupErrorf("copy: -from-header-file: %v", err)
		}
	}
	// Pages, not streams: the feed sets the pace, and a slice asks for its
	// next page only once the last is taken, so that the source visits
	// little ahead of what the destination acknowledged (a stream runs on
	// into the socket's buffers), and a copy killed visits little again.
	src, err := visit.New(visit.Config{URLs: f.from, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet,
		Slices: f.slices, Pages: true, Header: f.fromHeader.h, TLS: srcTLS, MaxOutage: orNone(f.to.maxOutage),
		WantedDocumentCount: copyPage, Log: stderr, LogPrefix: "retries copy: the source: "})
	if err != nil {
		return usageErrorf("copy: -from: %v", err)
	}
	ck := copyCheckpoint{Version: 1, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet, From: endpoints(f.from), To: endpoints(f.to.urls)}
	resumed := false
	if f.checkpoint != "" {
		if ck, resumed, err = readCopyCheckpoint(f.checkpoint, ck); err != nil {
			return setupErrorf("copy: -checkpoint: %v", err)
		}
		if ck.Complete {
			fmt.Fprintf(stderr, "retries copy: %s says the copy is complete: nothing to copy (remove it to copy again)\n", f.checkpoint)
			return nil
		}
		if n := ck.Progress.Slices; n != 0 && n != f.slices {
			return setupErrorf("copy: -checkpoint %s is of a copy in %d slices: give -slices %d (a continuation token holds only for its slicing)", f.checkpoint, n, n)
		}
		if resumed {
			fmt.Fprintf(stderr, "retries copy: resuming from %s: %d documents copied before\n", f.checkpoint, ck.Documents)
		}
		cfg.Resumable = true // what was not sent is visited again
	}
	var failed *os.File
	if f.to.failed != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if resumed {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND // what the copies before wrote stays
		}
		if failed, err = os.OpenFile(f.to.failed, flags, 0o644); err != nil {
			return setupErrorf("copy: -failed: %v", err)
		}
		defer failed.Close()
		cfg.Failed = failed
	}
	cp := newCopier(ck, f.checkpoint, failed)
	cfg.ProgressLine = func(p feed.Progress) string { return cp.line(p, src.Stats(), f.slices, f.to.maxOutage) }
	cfg.ProgressKeys = func() map[string]any { return cp.keys(src.Stats(), f.slices) }
	dst, err := feed.New(cfg)
	if err != nil {
		return usageErrorf("copy: -to: %v", err)
	}
	defer dst.Close()
	if err := cp.save(); err != nil {
		return setupErrorf("copy: -checkpoint: %v", err)
	}
	start := time.Now()
	vctx, stopVisit := context.WithCancel(ctx)
	defer stopVisit()
	// The visit ends when the feed stops, whatever stopped it: a page
	// waiting for room in the queue is woken, as nothing takes from the
	// queue any more.
	defer context.AfterFunc(vctx, cp.end)()
	visited := make(chan error, 1)
	go func() {
		p, err := src.Visit(vctx, ck.Progress, cp.page)
		cp.visitDone(p, err)
		visited <- err
	}()
	cp.startSaving()
	_ = dst.Feed(ctx, cp.ops(vctx), cp.done) // the report says what the error would
	stopVisit()
	verr := <-visited
	cp.stopSaving()
	res := dst.Report()
	serr := cp.save()
	if _, err := stdout.Write(res.Summary()); err != nil {
		return err
	}
	return copyExit(ctx, res, verr, serr, cp, f.checkpoint, time.Since(start), stderr)
}

// copyExit says how a copy ended, and returns the command's exit.
func copyExit(ctx context.Context, res feed.Report, verr, serr error, cp *copier, path string, took time.Duration, stderr io.Writer) error {
	visited, acked := cp.visited.Load(), cp.acked.Load()
	if serr != nil {
		fmt.Fprintf(stderr, "retries copy: -checkpoint: %v; %s may be behind the copy\n", serr, path)
	}
	var se *visit.StatusError
	if errors.As(verr, &se) {
		return setupErrorf("copy: the source: %v", verr)
	}
	var sx *setupError
	if err := feedExit(ctx, res, true); errors.As(err, &sx) {
		return err // the destination's TLS or setup
	}
	if verr != nil && !errors.Is(verr, context.Canceled) && !errors.Is(verr, visit.ErrMaxOutage) {
		fmt.Fprintf(stderr, "retries copy: the source: %v\n", verr)
	}
	switch {
	case verr == nil && res.Complete() && serr == nil:
		fmt.Fprintf(stderr, "retries copy: %d documents visited and acknowledged in %.1fs", visited, took.Seconds())
		if cp.base > 0 {
			fmt.Fprintf(stderr, "; %d in all, with the copies before the resume", cp.doneInAll())
		}
		fmt.Fprintln(stderr)
		return nil
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "retries copy: interrupted: %d documents visited, %d acknowledged\n", visited, acked)
		return silentExit(exitInterrupted)
	case res.OutageExceeded():
		fmt.Fprintf(stderr, "retries copy: %d documents visited, %d acknowledged: the destination was out for longer than -max-outage\n", visited, acked)
		return silentExit(exitOutage)
	case errors.Is(verr, visit.ErrMaxOutage):
		fmt.Fprintf(stderr, "retries copy: %d documents visited, %d acknowledged: the source: %s\n", visited, acked, strings.TrimPrefix(verr.Error(), "visit: "))
		return silentExit(exitOutage)
	}
	fmt.Fprintf(stderr, "retries copy: %d documents visited, %d acknowledged: not every document was copied\n", visited, acked)
	return errSilent
}

// readCopyCheckpoint reads the checkpoint at path, if there is one, for
// the copy that ck describes.
func readCopyCheckpoint(path string, ck copyCheckpoint) (copyCheckpoint, bool, error) {
	c, err := resume.ReadCheckpoint(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ck, false, nil
	case errors.Is(err, resume.ErrNotCheckpoint):
		return ck, false, fmt.Errorf("%s is not a checkpoint of retries copy", path)
	case err != nil:
		return ck, false, err
	}
	var prev copyCheckpoint
	if err := c.Decode("copy", &prev); err != nil {
		return ck, false, err
	}
	if prev.Version != 1 {
		return ck, false, fmt.Errorf("%s is not a checkpoint of retries copy", path)
	}
	if prev.Cluster != ck.Cluster || prev.Selection != ck.Selection || prev.FieldSet != ck.FieldSet {
		return ck, false, fmt.Errorf("%s was made for another copy (-cluster, -selection or -field-set differ): remove it to copy again", path)
	}
	switch {
	case prev.From != nil && !slices.Equal(prev.From, ck.From):
		return ck, false, fmt.Errorf("%s was made for a copy from other endpoints (-from differs): its continuation tokens are of another Vespa; give the -from it had, or remove it to copy again", path)
	case prev.To != nil && !slices.Equal(prev.To, ck.To):
		return ck, false, fmt.Errorf("%s was made for a copy to other endpoints (-to differs): the documents copied before went there, and the new destination would never get them; give the -to it had, or remove it to copy again", path)
	}
	prev.From, prev.To = ck.From, ck.To
	return prev, true, nil
}

// copyQueued bounds the documents visited and not yet taken by the feed,
// and copySaveEvery is the time between checkpoints: together with the
// slices' pages (copyPage documents each) they bound what a copy killed
// visits again: with 1 024 queued and pages of 256, a copy at 2 000
// documents a second visited 1.27 times the corpus over two kills.
const (
	copyPage      = 128
	copyQueued    = 512
	copySaveEvery = 250 * time.Millisecond
)

// copier moves documents from the visit to the feed, and the checkpoint
// past those the destination acknowledged. Each document visited gets an
// element of a ledger, in the order the visit hands them out; the feed
// takes them interleaved across the slices, and its done marks them. The
// checkpoint holds the progress of the last page all of whose documents,
// and those of every page before it, are done: the ledger's watermark.
type copier struct {
	led     *resume.Ledger
	base    int64 // the documents done before the copy resumed
	path    string
	failed  *os.File
	visited atomic.Int64
	acked   atomic.Int64
	slices  atomic.Int64 // done, as the last page handed out says

	mu      sync.Mutex
	changed *sync.Cond
	queues  map[int][]visit.Document // per slice: documents to feed, in order
	ords    map[int][]int64          // and their ordinals
	ring    []int                    // the slices with documents queued, in turn
	queued  int
	next    int64 // the next ordinal
	marks   []copyMark
	ended   bool // the visit ended
	vdone   bool // and was complete
	ck      copyCheckpoint
	stop    context.CancelFunc // ends the saves
	stopped chan struct{}
}

// copyMark is a page's progress, which holds once the elements up to
// last are done.
type copyMark struct {
	last int64
	prog visit.Progress
}

func newCopier(ck copyCheckpoint, path string, failed *os.File) *copier {
	cp := &copier{led: resume.New(nil), base: ck.Documents, path: path, failed: failed, ck: ck,
		queues: map[int][]visit.Document{}, ords: map[int][]int64{}}
	cp.changed = sync.NewCond(&cp.mu)
	return cp
}

// page is the visit's: it queues the page's documents, waiting while
// copyQueued are queued, and notes its progress.
func (cp *copier) page(pg visit.Page) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for cp.queued >= copyQueued && !cp.ended {
		cp.changed.Wait()
	}
	if cp.ended {
		return context.Canceled
	}
	if len(pg.Documents) > 0 && len(cp.queues[pg.Slice]) == 0 {
		cp.ring = append(cp.ring, pg.Slice)
	}
	for _, d := range pg.Documents {
		ord := cp.led.Add(cp.next, 0)
		cp.next++
		cp.queues[pg.Slice] = append(cp.queues[pg.Slice], d)
		cp.ords[pg.Slice] = append(cp.ords[pg.Slice], ord)
	}
	cp.queued += len(pg.Documents)
	cp.visited.Add(int64(len(pg.Documents)))
	cp.slices.Store(int64(pg.Progress.SlicesDone()))
	cp.marks = append(cp.marks, copyMark{last: cp.next - 1, prog: pg.Progress})
	cp.changed.Broadcast()
	return nil
}

// line is the copy's progress line, both sides on one: the documents
// visited and acknowledged count those of the copies before a resume,
// "copy 3.0s: 5200 visited (2 of 8 slices done), 5000 acknowledged,
// 1650/s, 0 failed, 32 in flight", and what each side waits for.
func (cp *copier) line(p feed.Progress, vs visit.Stats, slices int, maxOutage time.Duration) string {
	l := fmt.Sprintf("copy %5.1fs: %d visited (%d of %d slices done", p.Elapsed.Seconds(), cp.base+cp.visited.Load(), cp.slices.Load(), slices)
	if vs.Throttled > 0 {
		l += fmt.Sprintf(", %d×429 from the source", vs.Throttled)
	}
	l += fmt.Sprintf("), %d acknowledged, %.0f/s, %d failed, %d in flight", cp.base+p.Acknowledged, p.Rate, p.Failed, p.InFlight)
	if p.Throttled > 0 {
		l += fmt.Sprintf(", %d×429 from the destination", p.Throttled)
	}
	if p.Paused {
		l += "; the destination is out: sending only probes"
	}
	if f := failing(vs, maxOutage); f != "" {
		l += "; the source " + f
	}
	return l
}

// keys are the visit's side of a copy's JSON progress reports: the
// documents visited (of this run, and before the resume), the slices and
// those done, the source's 429s, and its failure while requests fail.
func (cp *copier) keys(vs visit.Stats, slices int) map[string]any {
	return map[string]any{
		"copy.visited.count": cp.visited.Load(), "copy.resumed.documents": cp.base,
		"copy.slices": slices, "copy.slices.done": cp.slices.Load(), "copy.source.throttled.count": vs.Throttled,
		"copy.source.failing": vs.Failing, "copy.source.failing.seconds": math.Round(vs.FailingFor.Seconds()*10) / 10,
	}
}

// doneInAll returns the documents the checkpoint counts done: acknowledged,
// or written to -failed, the copies before a resume included.
func (cp *copier) doneInAll() int64 {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.ck.Documents
}

// visitDone records the end of the visit.
func (cp *copier) visitDone(p visit.Progress, err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.ended, cp.vdone = true, err == nil && p.Complete()
	cp.changed.Broadcast()
}

// end ends the copy's queue: a page waiting for room returns, and ops
// yields no more once ctx has ended.
func (cp *copier) end() {
	cp.mu.Lock()
	cp.ended = true
	cp.changed.Broadcast()
	cp.mu.Unlock()
}

// ops yields the documents queued as puts, one slice's after another's
// in turn, until the visit has ended and none is left, or ctx ends (ctx
// must be the one whose end calls cp.end).
func (cp *copier) ops(ctx context.Context) iter.Seq2[feed.Operation, error] {
	return func(yield func(feed.Operation, error) bool) {
		for {
			cp.mu.Lock()
			for len(cp.ring) == 0 && !cp.ended {
				cp.changed.Wait()
			}
			if len(cp.ring) == 0 || ctx.Err() != nil {
				cp.mu.Unlock()
				return
			}
			s := cp.ring[0]
			d, ord := cp.queues[s][0], cp.ords[s][0]
			cp.queues[s], cp.ords[s] = cp.queues[s][1:], cp.ords[s][1:]
			cp.ring = cp.ring[1:]
			if len(cp.queues[s]) > 0 {
				cp.ring = append(cp.ring, s)
			} else {
				delete(cp.queues, s)
				delete(cp.ords, s)
			}
			cp.queued--
			cp.changed.Broadcast()
			cp.mu.Unlock()
			op := feed.Operation{Kind: feed.Put, ID: d.ID, Fields: fieldsOrEmpty(d.Fields), Tag: ord}
			if !yield(op, nil) {
				return
			}
		}
	}
}

// done is the feed's: a document acknowledged, or written to -failed, is
// done; one not sent, or failed without -failed, holds the checkpoint
// before it, so that a resumed copy sends it again.
func (cp *copier) done(o feed.Operation, _ feed.Result, err error) {
	ord, ok := o.Tag.(int64)
	if !ok {
		return
	}
	var fe *feed.Error
	switch {
	case err == nil:
		cp.acked.Add(1)
	case cp.failed != nil && errors.As(err, &fe) && !errors.Is(err, feed.ErrNotSent) && !fe.Unknown:
	default:
		return
	}
	cp.led.Done(ord)
}

// startSaving writes the checkpoint every copySaveEvery until
// stopSaving.
func (cp *copier) startSaving() {
	ctx, stop := context.WithCancel(context.Background())
	cp.stop, cp.stopped = stop, make(chan struct{})
	go func() {
		defer close(cp.stopped)
		_ = resume.Loop{Every: copySaveEvery, Commit: func(context.Context) error { return cp.save() }}.Run(ctx) // the last save says
	}()
}

func (cp *copier) stopSaving() {
	cp.stop()
	<-cp.stopped
}

// save moves the checkpoint to the last page whose documents, and those
// of every page before it, are done, and writes it: -failed synced first,
// then FILE whole under a temporary name, synced and renamed. (It writes
// it unchanged too: a few times a second is cheap, and a test sees each
// save.)
func (cp *copier) save() error {
	s := cp.led.Snapshot()
	cp.mu.Lock()
	for len(cp.marks) > 0 {
		m := cp.marks[0]
		if m.last >= 0 && !(m.last < s.Ord || (s.AllDone && m.last <= s.Ord)) {
			break
		}
		cp.ck.Progress, cp.ck.Documents = m.prog, cp.base+m.last+1
		cp.marks = cp.marks[1:]
	}
	if cp.ended && cp.vdone && len(cp.marks) == 0 && cp.ck.Progress.Complete() {
		cp.ck.Complete = true
	}
	ck := cp.ck
	cp.mu.Unlock()
	if cp.path == "" {
		return nil
	}
	if cp.failed != nil {
		if err := cp.failed.Sync(); err != nil {
			return fmt.Errorf("-failed: %v", err)
		}
	}
	return resume.WriteCheckpoint(cp.path, "copy", ck)
}
