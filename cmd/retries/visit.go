package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	pages                        bool
	slices                       int
	out, checkpoint, headerFile  string
	cert, key, ca                string
	maxOutage, progress          time.Duration
	quiet                        bool
	header                       headerFlag
}

// addVisitFlags defines the visit command's flags on fs.
func addVisitFlags(fs *flag.FlagSet, f *visitFlags) {
	fs.Var(&f.urls, "url", "the document/v1 endpoint `URL` (required); repeat it for several endpoints, the slices spread over them")
	fs.StringVar(&f.cluster, "cluster", "", "the content `CLUSTER` to visit (required)")
	fs.StringVar(&f.selection, "selection", "", "visit the documents that match the document selection `EXPR`")
	fs.StringVar(&f.fieldSet, "field-set", "", "the field set `FS` of each document, such as music:[document]")
	fs.IntVar(&f.slices, "slices", 8, "split the corpus into `N` slices, visited at once as the server allows (fixed for a -checkpoint)")
	fs.BoolVar(&f.pages, "pages", false, "ask for JSON pages instead of a stream of JSON lines")
	fs.StringVar(&f.out, "o", "", "write the documents to `FILE` as feed lines; default stdout")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the visit is, and resume from it when it exists (needs -o)")
	fs.Var(&f.header, "header", "send the header `'Name: value'` with every request (repeatable); never printed")
	fs.StringVar(&f.headerFile, "header-file", "", "read headers from `FILE`, one 'Name: value' a line; never printed")
	fs.StringVar(&f.cert, "cert", "", "the client certificate, a PEM `FILE`, for mutual TLS on https URLs")
	fs.StringVar(&f.key, "key", "", "the client certificate's private key, a PEM `FILE`")
	fs.StringVar(&f.ca, "ca", "", "trust the CA certificates of this PEM `FILE` instead of the system's")
	fs.DurationVar(&f.maxOutage, "max-outage", 5*time.Minute, "end the visit when a slice has failed for this long")
	fs.DurationVar(&f.progress, "progress", time.Second, "time between progress reports on stderr; 0: none")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines (as -progress 0)")
}

// visitCheckpoint is what -checkpoint FILE of a visit holds: what is
// visited, the output it goes to, how much of the output the progress
// covers, and the progress.
type visitCheckpoint struct {
	Version    int            `json:"version"`
	Cluster    string         `json:"cluster"`
	Selection  string         `json:"selection,omitempty"`
	FieldSet   string         `json:"field_set,omitempty"`
	Output     string         `json:"output"`
	URLs       []string       `json:"urls,omitempty"` // the endpoints visited; none in a checkpoint of an older version
	OutputSize int64          `json:"output_size"`
	Documents  int64          `json:"documents"`
	Progress   visit.Progress `json:"progress"`
	Complete   bool           `json:"complete,omitempty"`
}

// visitSaveEvery is the least time between two checkpoints of a visit:
// what a SIGKILL makes the next visit read again is about that long of it
// (at 18 000 documents a second, a second was 1.18 times the corpus over
// two kills).
const visitSaveEvery = 250 * time.Millisecond

// runVisit is the visit command.
func runVisit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := newFlagSet("visit")
	var f visitFlags
	addVisitFlags(fset, &f)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	switch {
	case f.header.check() != nil:
		return usageErrorf("visit: %v", f.header.check())
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
	}
	tlsCfg, err := feedTLS(f.cert, f.key, f.ca)
	if err != nil {
		return setupErrorf("visit: %v", err)
	}
	if f.headerFile != "" {
		if err := readHeaderFile(f.headerFile, &f.header); err != nil {
			return setupErrorf("visit: -header-file: %v", err)
		}
	}
	stderr = &syncWriter{w: stderr} // the visit's log and the progress lines write at once
	c, err := visit.New(visit.Config{URLs: f.urls, Pages: f.pages, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet,
		Slices: f.slices, Header: f.header.h, TLS: tlsCfg, MaxOutage: orNone(f.maxOutage), Log: stderr})
	if err != nil {
		return usageErrorf("visit: %v", err)
	}
	ck := visitCheckpoint{Version: 1, Cluster: f.cluster, Selection: f.selection, FieldSet: f.fieldSet, Output: f.out, URLs: endpoints(f.urls)}
	out := io.Writer(stdout)
	var file *os.File
	created := false // the output is this run's, and is removed if the server refuses the visit
	if f.out != "" {
		var size int64 = -1 // the output's before it is cut back to what the checkpoint covers
		if st, err := os.Stat(f.out); err == nil {
			size = st.Size()
		}
		if file, ck, created, err = openVisitOutput(f.out, f.checkpoint, ck); err != nil {
			return setupErrorf("visit: %v", err)
		}
		defer file.Close()
		out = file
		if ck.Complete {
			fmt.Fprintf(stderr, "retries visit: %s says the visit is complete: nothing to visit (remove it to visit again)\n", f.checkpoint)
			return nil
		}
		if n := ck.Progress.Slices; n != 0 && n != f.slices {
			return setupErrorf("visit: -checkpoint %s is of a visit in %d slices: give -slices %d (a continuation token holds only for its slicing)", f.checkpoint, n, n)
		}
		if ck.Progress.Slices != 0 {
			fmt.Fprintf(stderr, "retries visit: resuming from %s: %d documents in %s\n", f.checkpoint, ck.Documents, f.out)
			if size > ck.OutputSize {
				fmt.Fprintf(stderr, "retries visit: %s cut from %d to %d bytes: what was written after the checkpoint is visited again\n", f.out, size, ck.OutputSize)
			}
		}
	}
	w := bufio.NewWriterSize(out, 256<<10)
	if f.quiet {
		f.progress = 0
	}
	// The first piece is saved at once, then one every visitSaveEvery at
	// most.
	start, lastSave := time.Now(), time.Time{}
	prog := &visitProgress{slices: f.slices, maxOutage: f.maxOutage}
	prog.docs.Store(ck.Documents) // the documents written, those of the runs before a resume included
	stopProgress := prog.start(stderr, "visit", f.progress, start, c.Stats)
	// save makes what was written durable, then the checkpoint that covers
	// it: the output's size and the progress of the pages in it.
	save := func(p visit.Progress) error {
		if err := w.Flush(); err != nil {
			return err
		}
		if f.checkpoint == "" {
			return nil
		}
		if err := file.Sync(); err != nil {
			return err
		}
		size, err := file.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		ck.OutputSize, ck.Documents, ck.Progress, ck.Complete = size, prog.docs.Load(), p, p.Complete()
		return resume.WriteCheckpoint(f.checkpoint, "visit", ck)
	}
	p, err := c.Visit(ctx, ck.Progress, func(pg visit.Page) error {
		for _, d := range pg.Documents {
			id, _ := json.Marshal(d.ID)
			fmt.Fprintf(w, `{"put":%s,"fields":%s}`+"\n", id, fieldsOrEmpty(d.Fields))
		}
		prog.note(pg)
		now := time.Now()
		if now.Sub(lastSave) >= visitSaveEvery {
			lastSave = now
			if err := save(pg.Progress); err != nil {
				return fmt.Errorf("writing the output or the checkpoint: %w", err)
			}
		}
		return nil
	})
	stopProgress()
	var se *visit.StatusError
	if errors.As(err, &se) && created && prog.docs.Load() == 0 {
		// A refused visit (a cluster the server does not have) leaves
		// nothing behind.
		file.Close()
		os.Remove(f.out)
		if f.checkpoint != "" {
			os.Remove(f.checkpoint) // there was none before this run
		}
		return setupErrorf("%v", err)
	}
	if serr := save(p); serr != nil && err == nil {
		err = fmt.Errorf("writing the output or the checkpoint: %w", serr)
	}
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

// fieldsOrEmpty returns the fields of a document, or {} for none.
func fieldsOrEmpty(f json.RawMessage) json.RawMessage {
	if len(f) == 0 {
		return json.RawMessage("{}")
	}
	return f
}

// openVisitOutput opens the output path for a visit whose checkpoint is
// at ckPath (or none), and reports whether it created it: a new visit
// creates it; a resumed one cuts it back to the size the checkpoint
// covers, so that no document is written twice.
func openVisitOutput(path, ckPath string, ck visitCheckpoint) (*os.File, visitCheckpoint, bool, error) {
	if ckPath != "" {
		c, err := resume.ReadCheckpoint(ckPath)
		switch {
		case errors.Is(err, resume.ErrNotCheckpoint):
			return nil, ck, false, fmt.Errorf("%s is not a checkpoint of retries visit", ckPath)
		case err == nil:
			var prev visitCheckpoint
			if err := c.Decode("visit", &prev); err != nil {
				return nil, ck, false, err
			}
			if prev.Version != 1 {
				return nil, ck, false, fmt.Errorf("%s is not a checkpoint of retries visit", ckPath)
			}
			if prev.Cluster != ck.Cluster || prev.Selection != ck.Selection || prev.FieldSet != ck.FieldSet || prev.Output != ck.Output {
				return nil, ck, false, fmt.Errorf("%s was made for another visit (-cluster, -selection, -field-set or -o differ): remove it to visit again", ckPath)
			}
			if prev.URLs != nil && !slices.Equal(prev.URLs, ck.URLs) {
				return nil, ck, false, fmt.Errorf("%s was made for a visit of other endpoints (-url differs): a continuation token of one Vespa means nothing to another, and the output would mix two corpora; give the -url it had, or remove it to visit again", ckPath)
			}
			prev.URLs = ck.URLs
			file, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return nil, ck, false, err
			}
			st, err := file.Stat()
			if err == nil && st.Size() < prev.OutputSize {
				err = fmt.Errorf("%s holds %d bytes, fewer than the %d the checkpoint covers", path, st.Size(), prev.OutputSize)
			}
			if err == nil {
				err = file.Truncate(prev.OutputSize)
			}
			if err == nil {
				_, err = file.Seek(prev.OutputSize, io.SeekStart)
			}
			if err != nil {
				file.Close()
				return nil, ck, false, err
			}
			return file, prev, false, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, ck, false, err
		}
	}
	file, err := os.Create(path)
	return file, ck, err == nil, err
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
