package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
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
	share                        shareFlag
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
	addShareFlag(fs, &f.share, "copy")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the copy is, past the documents the destination acknowledged, and resume from it when it exists")
	fs.Var(&f.fromHeader, "from-header", "send the header `'Name: value'` with every request to the source (repeatable); never printed")
	fs.StringVar(&f.fromHeaderFile, "from-header-file", "", "read the source's headers from `FILE`, one 'Name: value' a line; never printed")
	fs.StringVar(&f.fromCert, "from-cert", "", "the client certificate for the source, a PEM `FILE`, for mutual TLS on https URLs")
	fs.StringVar(&f.fromKey, "from-key", "", "the private key of -from-cert, a PEM `FILE`")
	fs.StringVar(&f.fromCA, "from-ca", "", "trust the CA certificates of this PEM `FILE` for the source instead of the system's")
	addSendFlags(fs, &f.to)
	fs.Lookup("max-outage").Usage = "end the copy when the source or the destination has been out for this long; 0: wait for ever"
}

// check returns a usage error for flags and arguments pos that cannot
// make a copy.
func (f *copyFlags) check(pos []string) error {
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
	if err := checkShare("copy", f.share, f.slices); err != nil {
		return err
	}
	return f.to.check([]string{"-"})
}

// source returns the visit client of the source.
func (f *copyFlags) source(stderr io.Writer) (*visit.Client, error) {
	srcTLS, err := loadTLS(f.fromCert, f.fromKey, f.fromCA)
	if err != nil {
		return nil, setupErrorf("copy: -from-cert, -from-key, -from-ca: %v", err)
	}
	if f.fromHeaderFile != "" {
		if err := readHeaderFile(f.fromHeaderFile, &f.fromHeader); err != nil {
			return nil, setupErrorf("copy: -from-header-file: %v", err)
		}
	}
	// Pages, not streams: the feed sets the pace, and a slice asks for its
	// next page only once the last is taken, so that the source visits
	// little ahead of what the destination acknowledged (a stream runs on
	// into the socket's buffers), and a copy killed visits little again.
	src, err := visit.New(visit.Config{URLs: f.from, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet,
		Slices: f.slices, Share: f.share.share, Pages: true, Header: f.fromHeader.h, TLS: srcTLS, MaxOutage: orNone(f.to.maxOutage),
		WantedDocumentCount: copyPage, Log: stderr, LogPrefix: "retries copy: the source: "})
	if err != nil {
		return nil, usageErrorf("copy: -from: %v", err)
	}
	return src, nil
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
	f.slices = shareSlices(fset, f.share, f.slices)
	if err := f.check(pos); err != nil {
		return err
	}
	stderr = &syncWriter{w: stderr} // the visit's log, the feed's and the progress write at once
	cfg, err := f.to.config(stderr)
	if err != nil {
		return err
	}
	cfg.LogPrefix = "retries copy: the destination: "
	src, err := f.source(stderr)
	if err != nil {
		return err
	}
	of := resume.CopyOf{Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet, From: endpoints(f.from), To: endpoints(f.to.urls), Share: f.share.share}
	cp, err := resume.OpenCopy(f.checkpoint, of, f.slices)
	if err != nil {
		return setupErrorf("copy: -checkpoint: %v", err)
	}
	defer cp.Close()
	begun := cp.Start()
	if begun.Complete {
		fmt.Fprintf(stderr, "retries copy: %s says the copy is complete: nothing to copy (remove it to copy again)\n", f.checkpoint)
		return nil
	}
	if begun.Resumed {
		fmt.Fprintf(stderr, "retries copy: resuming from %s: %d documents copied before\n", f.checkpoint, begun.Before)
	}
	if f.checkpoint != "" {
		cfg.Resumable = true // what was not sent is visited again
	}
	var failed *os.File
	if f.to.failed != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if begun.Resumed {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND // what the copies before wrote stays
		}
		if failed, err = os.OpenFile(f.to.failed, flags, 0o644); err != nil {
			return setupErrorf("copy: -failed: %v", err)
		}
		defer failed.Close()
		cfg.Failed = failed
	}
	cfg.ProgressLine = func(p feed.Progress) string {
		return copyLine(p, cp.Stats(), src.Stats(), f.share.share.Count(f.slices), f.to.maxOutage)
	}
	cfg.ProgressKeys = func() map[string]any { return copyKeys(cp.Stats(), src.Stats(), f.share.share.Count(f.slices)) }
	dst, err := feed.New(cfg)
	if err != nil {
		return usageErrorf("copy: -to: %v", err)
	}
	defer dst.Close()
	start := time.Now()
	r, err := cp.Run(ctx, src, dst, failed)
	if err != nil {
		return setupErrorf("copy: -checkpoint: %v", err)
	}
	if _, err := stdout.Write(r.Report.Summary()); err != nil {
		return err
	}
	return copyExit(ctx, r, cp.Stats(), f.checkpoint, time.Since(start), stderr)
}

// copyExit says how a copy ended, and returns the command's exit.
func copyExit(ctx context.Context, r resume.CopyResult, st resume.CopyStats, path string, took time.Duration, stderr io.Writer) error {
	res, verr, serr := r.Report, r.Visit, r.Checkpoint
	visited, acked := st.Visited, st.Acknowledged
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
	case r.Complete():
		fmt.Fprintf(stderr, "retries copy: %d documents visited and acknowledged in %.1fs", visited, took.Seconds())
		if st.Before > 0 {
			fmt.Fprintf(stderr, "; %d in all, with the copies before the resume", st.Done)
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

// copyPage is the documents a slice's page asks for: with the copy's
// queue (512 documents) and its checkpoints (4 a second) it bounds what a
// copy killed visits again (resume.Copier).
const copyPage = 128

// copyLine is the copy's progress line, both sides on one: the documents
// visited and acknowledged count those of the copies before a resume,
// "copy 3.0s: 5200 visited (2 of 8 slices done), 5000 acknowledged,
// 1650/s, 0 failed, 32 in flight", and what each side waits for.
func copyLine(p feed.Progress, st resume.CopyStats, vs visit.Stats, slices int, maxOutage time.Duration) string {
	l := fmt.Sprintf("copy %5.1fs: %d visited (%d of %d slices done", p.Elapsed.Seconds(), st.Before+st.Visited, st.SlicesDone, slices)
	if vs.Throttled > 0 {
		l += fmt.Sprintf(", %d×429 from the source", vs.Throttled)
	}
	l += fmt.Sprintf("), %d acknowledged, %.0f/s, %d failed, %d in flight", st.Before+p.Acknowledged, p.Rate, p.Failed, p.InFlight)
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

// copyKeys are the visit's side of a copy's JSON progress reports: the
// documents visited (of this run, and before the resume), the slices and
// those done, the source's 429s, and its failure while requests fail.
func copyKeys(st resume.CopyStats, vs visit.Stats, slices int) map[string]any {
	return map[string]any{
		"copy.visited.count": st.Visited, "copy.resumed.documents": st.Before,
		"copy.slices": slices, "copy.slices.done": st.SlicesDone, "copy.source.throttled.count": vs.Throttled,
		"copy.source.failing": vs.Failing, "copy.source.failing.seconds": math.Round(vs.FailingFor.Seconds()*10) / 10,
	}
}
