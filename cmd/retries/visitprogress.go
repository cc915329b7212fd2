package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries/visit"
)

// syncWriter serialises the writes to w of the goroutines that report:
// a visit's log, a feed's, the progress lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// visitProgress is what a visit's progress line says besides the
// Client's Stats: the documents written (those of a resumed run
// included) and the slices done, as the pages hand them out.
type visitProgress struct {
	docs       atomic.Int64
	slicesDone atomic.Int64
	slices     int    // this run's: its share's
	others     int    // the other shares' slices, which its progress holds as done
	share      string // "I/W", or "" for the whole run
	maxOutage  time.Duration
}

// newVisitProgress returns the progress of a run of slices slices in all,
// of which share is this run's.
func newVisitProgress(slices int, share visit.Share, maxOutage time.Duration) *visitProgress {
	p := &visitProgress{slices: share.Count(slices), maxOutage: maxOutage}
	if share.Of > 1 {
		p.others, p.share = slices-p.slices, share.String()
	}
	return p
}

// note records a page handed out.
func (p *visitProgress) note(pg visit.Page) {
	p.docs.Add(int64(len(pg.Documents) + pg.Processed))
	p.slicesDone.Store(int64(pg.Progress.SlicesDone() - p.others))
}

// line is the progress line of the visit, elapsed after its start, with
// rate the documents a second since the last line: "visit 3.0s: 1200
// documents, 400/s, 2 of 8 slices done, 5 throttled (429)", and while
// the requests fail, for how long, why and how long the visit waits more.
func (p *visitProgress) line(name string, elapsed time.Duration, rate float64, s visit.Stats) string {
	of := ""
	if p.share != "" {
		of = " of share " + p.share
	}
	l := fmt.Sprintf("%s %5.1fs: %d documents, %.0f/s, %d of %d slices%s done", name, elapsed.Seconds(), p.docs.Load(), rate, p.slicesDone.Load(), p.slices, of)
	if s.Throttled > 0 {
		l += fmt.Sprintf(", %d throttled (429)", s.Throttled)
	}
	if f := failing(s, p.maxOutage); f != "" {
		l += "; " + f
	}
	return l
}

// failing says, for a progress line, for how long a visit's requests have
// failed, why, and how long the command waits more (to a tenth of a second
// in its last minute), or "" while they succeed.
func failing(s visit.Stats, maxOutage time.Duration) string {
	if s.Failing == "" {
		return ""
	}
	f := fmt.Sprintf("failing for %v: %s", s.FailingFor.Round(100*time.Millisecond), s.Failing)
	if maxOutage > 0 {
		left := max(maxOutage-s.FailingFor, 0)
		if left < time.Minute {
			left = left.Round(100 * time.Millisecond)
		} else {
			left = left.Round(time.Second)
		}
		f += fmt.Sprintf("; ending in %v unless a request succeeds (-max-outage)", left)
	}
	return f
}

// start writes p's line to w every interval (none for 0) until the
// function it returns is called, which returns once the last line is
// written.
func (p *visitProgress) start(w io.Writer, name string, interval time.Duration, start time.Time, stats func() visit.Stats) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		p.report(w, name, interval, start, stats, quit)
	}()
	return func() { close(quit); <-done }
}

// report writes p's line to w every interval until stop is closed.
func (p *visitProgress) report(w io.Writer, name string, interval time.Duration, start time.Time, stats func() visit.Stats, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastDocs := start, p.docs.Load()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			docs := p.docs.Load()
			rate := float64(docs-lastDocs) / now.Sub(last).Seconds()
			last, lastDocs = now, docs
			fmt.Fprintln(w, p.line(name, now.Sub(start), rate, stats()))
		}
	}
}
