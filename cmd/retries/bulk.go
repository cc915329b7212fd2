package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
)

// bulkFlags are the flags of the delete and update commands.
type bulkFlags struct {
	urls                urlsFlag
	cluster, selection  string
	namespace, docType  string
	update, marker      string // update only
	slices              int
	share               shareFlag
	checkpoint          string
	maxOutage, progress time.Duration
	quiet, verify       bool
	count               bool
	conn                connFlags
	updating            bool
}

// addBulkFlags defines the flags of delete, or of update, on fs.
func addBulkFlags(fs *flag.FlagSet, f *bulkFlags, update bool) {
	f.updating = update
	verb := "delete"
	if update {
		verb = "update"
	}
	fs.Var(&f.urls, "url", "the document/v1 endpoint `URL` (required); repeat it for several endpoints, the slices spread over them")
	fs.StringVar(&f.cluster, "cluster", "", "the content `CLUSTER` (required)")
	fs.StringVar(&f.selection, "selection", "", "the document selection `EXPR` of the documents to "+verb+" (required; true for every one)")
	if update {
		fs.StringVar(&f.namespace, "namespace", "", "the documents' `NS` (required)")
		fs.StringVar(&f.docType, "type", "", "the documents' type `T` (required)")
		fs.StringVar(&f.update, "update", "", "the update, `JSON` ({\"fields\": {…}}) or @FILE (required)")
		fs.StringVar(&f.marker, "marker", "", "a string attribute `FIELD` of the type, marked with the run's id, so that an update not safe to repeat (an increment, an add…) is applied once (needs -checkpoint, which keeps the run's id)")
	} else {
		fs.StringVar(&f.namespace, "namespace", "", "with -type: delete the documents of namespace `NS` only")
		fs.StringVar(&f.docType, "type", "", "with -namespace: delete the documents of type `T` only")
	}
	// 16 slices, where visit has 8: a request is a time chunk (30 s in
	// Vespa), and a slice has one in flight, so the run ends with its
	// slices' remainders one after the other; with 4 visitors served at
	// once, 8 slices took 10.2 s, 16 took 8.3 s and 32 took 8.5 s for
	// 7.7 s of work (docs/bulk.md).
	addShareFlag(fs, &f.share, verb)
	fs.IntVar(&f.slices, "slices", 16, "split the corpus into `N` slices, processed at once as the server allows (fixed for a -checkpoint)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the run is, and resume from it when it exists")
	fs.BoolVar(&f.verify, "verify", false, "at the end, visit the selection again and say how many documents still match (0 once done)")
	fs.BoolVar(&f.count, "count", false, "say how many documents the selection matches (of -namespace and -type, when given) and "+verb+" nothing")
	addConnFlags(fs, &f.conn)
	fs.DurationVar(&f.maxOutage, "max-outage", 5*time.Minute, "end the run when a slice has failed for this long")
	f.progress = time.Second
	fs.Var((*progressFlag)(&f.progress), "progress", "time between progress reports on stderr; -progress alone: 1s; 0 or false: none")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines (as -progress 0)")
}

// runBulk is the delete command, or with update the update command: its
// flags checked, -count answered, or the run opened, run, and its end
// said.
func runBulk(ctx context.Context, args []string, update bool, stdout, stderr io.Writer) error {
	name := map[bool]string{false: "delete", true: "update"}[update]
	fset := newFlagSet(name)
	var f bulkFlags
	addBulkFlags(fset, &f, update)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	f.slices = shareSlices(fset, f.share, f.slices)
	if err := f.check(name, update, pos); err != nil {
		return err
	}
	proc, err := f.process(update)
	if err != nil {
		return err
	}
	header, tlsCfg, err := f.conn.load()
	if err != nil {
		return setupErrorf("%s: %v", name, err)
	}
	cfg := visit.Config{URLs: f.urls, Cluster: f.cluster, Selection: f.selection, Slices: f.slices, Share: f.share.share, Header: header, TLS: tlsCfg,
		MaxOutage: orNone(f.maxOutage), Log: stderr, LogPrefix: "retries " + name + ": "}
	if f.count {
		cfg.Namespace, cfg.DocumentType = f.namespace, f.docType
		n, err := countMatches(ctx, cfg)
		if err != nil {
			return bulkCountError(ctx, name, "-count", err, stderr)
		}
		fmt.Fprintf(stdout, "{\"matches\":%d}\n", n)
		fmt.Fprintf(stderr, "retries %s: -count: %d documents match; nothing %sd\n", name, n, name)
		return nil
	}
	b, err := resume.OpenBulk(f.checkpoint, resume.BulkOf{Cluster: f.cluster, Selection: f.selection, Update: proc.Update,
		Namespace: f.namespace, DocumentType: f.docType, Marker: f.marker, URLs: endpoints(f.urls), Share: f.share.share}, f.slices)
	if err != nil {
		return setupErrorf("%s: -checkpoint: %v", name, err)
	}
	defer b.Close()
	begun := b.Start()
	if begun.Complete {
		fmt.Fprintf(stderr, "retries %s: %s says the run is complete: nothing to do (remove it to run again)\n", name, f.checkpoint)
		return nil
	}
	if begun.Resumed {
		fmt.Fprintf(stderr, "retries %s: resuming from %s: %d documents processed before\n", name, f.checkpoint, begun.Before)
	}
	proc.Run = b.RunID()
	stderr = &syncWriter{w: stderr}
	cfg.Log, cfg.Process = stderr, proc
	c, err := visit.New(cfg)
	if err != nil {
		return usageErrorf("%s: %s", name, strings.TrimPrefix(err.Error(), "visit: "))
	}
	if f.quiet {
		f.progress = 0
	}
	start := time.Now()
	prog := newVisitProgress(f.slices, f.share.share, f.maxOutage)
	prog.docs.Store(begun.Before)
	stopProgress := prog.start(stderr, name, f.progress, start, c.Stats)
	err = b.Run(ctx, c, prog.note)
	stopProgress()
	return bulkEnd(ctx, bulkRun{name: name, f: &f, cfg: cfg, b: b, begun: begun, stats: c.Stats(), took: time.Since(start)}, err, stdout, stderr)
}

// check returns a usage error for flags and arguments pos that cannot make
// a run of the command called name.
func (f *bulkFlags) check(name string, update bool, pos []string) error {
	switch {
	case f.conn.header.check() != nil:
		return usageErrorf("%s: %v", name, f.conn.header.check())
	case len(f.urls) == 0 || f.cluster == "" || f.selection == "":
		return usageErrorf("%s: -url, -cluster and -selection are required", name)
	case update && (f.namespace == "" || f.docType == "" || f.update == ""):
		return usageErrorf("update: -namespace, -type and -update are required")
	case f.marker != "" && f.checkpoint == "":
		return usageErrorf("update: -marker needs -checkpoint: the run's id, which the marker writes, is kept there before the first request, so that the same command run again after an interrupt goes on with it and applies the update once; without it, a second run is a new run, and applies it again to what the first reached")
	case (f.namespace == "") != (f.docType == ""):
		return usageErrorf("%s: -namespace and -type go together", name)
	case len(pos) > 0:
		return usageErrorf("%s: unexpected argument %q", name, pos[0])
	case f.slices < 1 || f.slices > 4096:
		return usageErrorf("%s: -slices %d: want 1 to 4096", name, f.slices)
	case f.maxOutage < 0 || f.progress < 0:
		return usageErrorf("%s: -max-outage and -progress must not be negative", name)
	}
	return checkShare(name, f.share, f.slices)
}

// process returns the run's processing: a delete, or the update of
// -update (read from a file for @FILE), refused unless safe to apply twice
// or marked.
func (f *bulkFlags) process(update bool) (*visit.Process, error) {
	proc := &visit.Process{Namespace: f.namespace, DocumentType: f.docType, Marker: f.marker}
	if !update {
		return proc, nil
	}
	body := []byte(f.update)
	if file, ok := strings.CutPrefix(f.update, "@"); ok {
		var err error
		if body, err = os.ReadFile(file); err != nil {
			return nil, setupErrorf("update: -update: %v", err)
		}
	}
	proc.Update = json.RawMessage(body)
	safe, err := visit.SafeToRepeat(proc.Update)
	switch {
	case err != nil:
		return nil, usageErrorf("update: -update: %s", strings.TrimPrefix(err.Error(), "visit: "))
	case !safe && f.marker == "":
		return nil, usageErrorf("update: -update is not safe to apply twice (an increment, a decrement, a multiplication, a division, an add or a modify): a request that fails after part of its chunk is asked again, and would apply it again to what it reached; give -marker FIELD, a string attribute of the type (see docs/bulk.md)")
	}
	return proc, nil
}

// bulkRun is what bulkEnd says of a run.
type bulkRun struct {
	name  string
	f     *bulkFlags
	cfg   visit.Config
	b     *resume.Bulk
	begun resume.Start
	stats visit.Stats
	took  time.Duration
}

// bulkEnd writes the run's summary on stdout and says how it ended, err
// being the run's error: the exit.
func bulkEnd(ctx context.Context, r bulkRun, err error, stdout, stderr io.Writer) error {
	name, st, processed := r.name, r.stats, r.b.Processed()
	summary, _ := json.Marshal(map[string]any{"documents": processed, "requests": st.Requests, "throttled": st.Throttled, "cut": st.Cut,
		"failed": st.Failed, "seconds": r.took.Round(time.Millisecond).Seconds()})
	if _, werr := stdout.Write(append(summary, '\n')); werr != nil && err == nil {
		err = werr
	}
	var se *visit.StatusError
	switch {
	case err == nil:
		fmt.Fprintf(stderr, "retries %s: every slice done in %.1fs: the server reported %d documents %sd", name, r.took.Seconds(), processed, name)
		if st.Failed+st.Cut > 0 {
			fmt.Fprintf(stderr, " (and some more in the %d requests that failed part way, which report none)", st.Failed+st.Cut)
		}
		fmt.Fprintln(stderr)
		if r.f.verify {
			return verifyBulk(ctx, r.cfg, name, stderr)
		}
		return nil
	case errors.As(err, &se):
		if r.f.checkpoint != "" && !r.begun.Resumed && processed == 0 {
			os.Remove(r.f.checkpoint) // a refused run leaves nothing behind: there was none before it
		}
		return setupErrorf("%s: %s", name, strings.TrimPrefix(err.Error(), "visit: ")) // a bad selection, an unknown cluster
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "retries %s: interrupted after %d documents\n", name, processed)
		return silentExit(exitInterrupted)
	case errors.Is(err, visit.ErrMaxOutage):
		fmt.Fprintf(stderr, "retries %s: %s\n", name, strings.TrimPrefix(err.Error(), "visit: "))
		return silentExit(exitOutage)
	}
	fmt.Fprintf(stderr, "retries %s: %s\n", name, strings.TrimPrefix(err.Error(), "visit: "))
	return errSilent
}

// verifyBulk visits what a run of cfg's selects (with its marker, those
// not marked), ids only, and says how many still match: exit 1 if any.
func verifyBulk(ctx context.Context, cfg visit.Config, name string, stderr io.Writer) error {
	p := cfg.Process
	if p.Marker == "" && p.Update != nil {
		fmt.Fprintf(stderr, "retries update: -verify: without -marker, a document updated still matches the selection: nothing to count\n")
		return nil
	}
	// The documents of the run's namespace and type alone, as it saw them.
	cfg.Process, cfg.Selection = nil, p.Selection(cfg.Selection)
	cfg.Namespace, cfg.DocumentType = p.Namespace, p.DocumentType
	n, err := countMatches(ctx, cfg)
	if err != nil {
		return bulkCountError(ctx, name, "-verify", err, stderr)
	}
	if n > 0 {
		fmt.Fprintf(stderr, "retries %s: -verify: %d documents still match\n", name, n)
		return errSilent
	}
	fmt.Fprintf(stderr, "retries %s: -verify: no document matches\n", name)
	return nil
}

// countMatches visits what cfg selects, ids only, and counts it.
func countMatches(ctx context.Context, cfg visit.Config) (int, error) {
	cfg.FieldSet, cfg.Pages = "[id]", true
	c, err := visit.New(cfg)
	if err != nil {
		return 0, usageErrorf("%s", strings.TrimPrefix(err.Error(), "visit: "))
	}
	n := 0
	_, err = c.Visit(ctx, visit.Progress{}, func(pg visit.Page) error { n += len(pg.Documents); return nil })
	return n, err
}

// bulkCountError is the error of a count (what says which: -count,
// -verify) that failed with err; it says so on stderr when no error of
// the command will.
func bulkCountError(ctx context.Context, name, what string, err error, stderr io.Writer) error {
	var se *visit.StatusError
	var ue *usageError
	msg := strings.TrimPrefix(err.Error(), "visit: ")
	switch {
	case errors.As(err, &ue):
		return usageErrorf("%s: %s: %s", name, what, ue.msg)
	case errors.As(err, &se):
		return setupErrorf("%s: %s: %s", name, what, msg)
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "retries %s: %s: interrupted\n", name, what)
		return silentExit(exitInterrupted)
	}
	fmt.Fprintf(stderr, "retries %s: %s: %s\n", name, what, msg)
	if errors.Is(err, visit.ErrMaxOutage) {
		return silentExit(exitOutage)
	}
	return errSilent
}

// progressFlag is -progress of delete and update: a duration, or alone (as
// the scripts call it, "-progress") one second, and false none.
type progressFlag time.Duration

func (p *progressFlag) String() string { return time.Duration(*p).String() }

func (p *progressFlag) IsBoolFlag() bool { return true }

func (p *progressFlag) Set(s string) error {
	switch s {
	case "true":
		*p = progressFlag(time.Second)
		return nil
	case "false":
		*p = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration, such as 2s, or none (-progress alone: 1s)")
	}
	*p = progressFlag(d)
	return nil
}
