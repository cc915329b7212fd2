package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
)

// visitFlags are the flags of the visit command.
type visitFlags struct {
	urls                         urlsFlag
	cluster, selection, fieldSet string
	namespace, docType           string
	pages                        bool
	slices                       int
	share                        shareFlag
	out, checkpoint              string
	maxOutage, progress          time.Duration
	quiet                        bool
	conn                         connFlags
}

// addVisitFlags defines the visit command's flags on fs.
func addVisitFlags(fs *flag.FlagSet, f *visitFlags) {
	fs.Var(&f.urls, "url", "the document/v1 endpoint `URL` (required); repeat it for several endpoints, the slices spread over them")
	fs.StringVar(&f.cluster, "cluster", "", "the content `CLUSTER` to visit (required)")
	fs.StringVar(&f.selection, "selection", "", "visit the documents that match the document selection `EXPR`")
	fs.StringVar(&f.namespace, "namespace", "", "with -type: visit the documents of namespace `NS` only")
	fs.StringVar(&f.docType, "type", "", "with -namespace: visit the documents of type `T` only")
	fs.StringVar(&f.fieldSet, "field-set", "", "the field set `FS` of each document, such as music:[document]")
	fs.IntVar(&f.slices, "slices", 8, "split the corpus into `N` slices, visited at once as the server allows (fixed for a -checkpoint)")
	addShareFlag(fs, &f.share, "visit")
	fs.BoolVar(&f.pages, "pages", false, "ask for JSON pages instead of a stream of JSON lines")
	fs.StringVar(&f.out, "o", "", "write the documents to `FILE` as feed lines; default stdout")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the visit is, and resume from it when it exists (needs -o)")
	addConnFlags(fs, &f.conn)
	fs.DurationVar(&f.maxOutage, "max-outage", 5*time.Minute, "end the visit when a slice has failed for this long")
	fs.DurationVar(&f.progress, "progress", time.Second, "time between progress reports on stderr; 0: none")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines (as -progress 0)")
}

// runVisit is the visit command.
func runVisit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := newFlagSet("visit")
	var f visitFlags
	addVisitFlags(fset, &f)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	f.slices = shareSlices(fset, f.share, f.slices)
	if err := f.check(pos); err != nil {
		return err
	}
	header, tlsCfg, err := f.conn.load()
	if err != nil {
		return setupErrorf("visit: %v", err)
	}
	stderr = &syncWriter{w: stderr} // the visit's log and the progress lines write at once
	c, err := visit.New(visit.Config{URLs: f.urls, Pages: f.pages, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet,
		Slices: f.slices, Share: f.share.share, Namespace: f.namespace, DocumentType: f.docType, Header: header, TLS: tlsCfg, MaxOutage: orNone(f.maxOutage), Log: stderr})
	if err != nil {
		return usageErrorf("visit: %v", err)
	}
	if f.quiet {
		f.progress = 0
	}
	start := time.Now()
	prog := newVisitProgress(f.slices, f.share.share, f.maxOutage)
	if f.out == "" {
		err := visitToStdout(ctx, c, prog, f.progress, start, stdout, stderr)
		return visitExit(ctx, err, prog, start, stderr)
	}
	v, err := resume.OpenVisit(f.checkpoint, resume.VisitOf{Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet, URLs: endpoints(f.urls), Output: f.out, Share: f.share.share,
		Namespace: f.namespace, DocumentType: f.docType}, f.slices)
	if err != nil {
		return setupErrorf("visit: %v", err)
	}
	defer v.Close()
	begun := v.Start()
	if begun.Complete {
		fmt.Fprintf(stderr, "retries visit: %s says the visit is complete: nothing to visit (remove it to visit again)\n", f.checkpoint)
		return nil
	}
	if begun.Resumed {
		fmt.Fprintf(stderr, "retries visit: resuming from %s: %d documents in %s\n", f.checkpoint, begun.Before, f.out)
		if from, to := v.Cut(); from > to {
			fmt.Fprintf(stderr, "retries visit: %s cut from %d to %d bytes: what was written after the checkpoint is visited again\n", f.out, from, to)
		}
	}
	prog.docs.Store(v.Documents()) // the documents written, those of the runs before a resume included
	stopProgress := prog.start(stderr, "visit", f.progress, start, c.Stats)
	err = v.Run(ctx, c, prog.note)
	stopProgress()
	var se *visit.StatusError
	if errors.As(err, &se) && !begun.Resumed && v.Documents() == 0 {
		// A refused visit (a cluster the server does not have) leaves
		// nothing behind: nothing was done before it either.
		v.Close()
		os.Remove(f.out)
		if f.checkpoint != "" {
			os.Remove(f.checkpoint) // none before this run, or one of nothing done
		}
		return setupErrorf("%v", err)
	}
	return visitExit(ctx, err, prog, start, stderr)
}

// check returns a usage error for flags and arguments pos that cannot
// make a visit.
func (f *visitFlags) check(pos []string) error {
	switch {
	case f.conn.header.check() != nil:
		return usageErrorf("visit: %v", f.conn.header.check())
	case len(f.urls) == 0 || f.cluster == "":
		return usageErrorf("visit: -url and -cluster are required")
	case len(pos) > 0:
		return usageErrorf("visit: unexpected argument %q", pos[0])
	case f.slices < 1 || f.slices > 4096:
		return usageErrorf("visit: -slices %d: want 1 to 4096", f.slices)
	case f.checkpoint != "" && f.out == "":
		return usageErrorf("visit: -checkpoint needs -o FILE: stdout cannot be resumed")
	case f.checkpoint != "" && sameFile(f.out, f.checkpoint):
		return usageErrorf("visit: -o and -checkpoint name the same file")
	case f.maxOutage < 0 || f.progress < 0:
		return usageErrorf("visit: -max-outage and -progress must not be negative")
	case (f.namespace == "") != (f.docType == ""):
		return usageErrorf("visit: -namespace and -type go together")
	}
	return checkShare("visit", f.share, f.slices)
}

// visitToStdout visits with c to stdout: nothing to resume.
func visitToStdout(ctx context.Context, c *visit.Client, prog *visitProgress, every time.Duration, start time.Time, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 256<<10)
	stopProgress := prog.start(stderr, "visit", every, start, c.Stats)
	_, err := c.Visit(ctx, visit.Progress{}, func(pg visit.Page) error {
		prog.note(pg)
		return resume.WritePage(w, pg)
	})
	stopProgress()
	if ferr := w.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("writing the output: %w", ferr)
	}
	return err
}

// visitExit says how a visit ended, and returns the command's exit.
func visitExit(ctx context.Context, err error, prog *visitProgress, start time.Time, stderr io.Writer) error {
	var se *visit.StatusError
	switch {
	case err == nil:
		fmt.Fprintf(stderr, "retries visit: %d documents, every slice visited, in %.1fs\n", prog.docs.Load(), time.Since(start).Seconds())
		return nil
	case errors.As(err, &se):
		return setupErrorf("%v", err) // "visit: 400 Bad Request: …"
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "retries visit: interrupted after %d documents\n", prog.docs.Load())
		return silentExit(exitInterrupted)
	case errors.Is(err, visit.ErrMaxOutage):
		fmt.Fprintf(stderr, "retries visit: %s\n", strings.TrimPrefix(err.Error(), "visit: "))
		return silentExit(exitOutage)
	}
	fmt.Fprintf(stderr, "retries visit: %s\n", strings.TrimPrefix(err.Error(), "visit: "))
	return errSilent
}

// endpoints returns urls as a checkpoint records them: sorted, without
// duplicates, a trailing slash or a user and password (a checkpoint holds
// no credential), so that the same endpoints in any order compare equal:
// the slices' tokens hold on any endpoint of the same Vespa.
func endpoints(urls []string) []string {
	out := make([]string, len(urls))
	for i, s := range urls {
		if u, err := url.Parse(s); err == nil {
			u.User = nil
			s = u.String()
		}
		out[i] = strings.TrimRight(s, "/")
	}
	slices.Sort(out)
	return slices.Compact(out)
}
