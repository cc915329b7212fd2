package resume

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/seed32e55400/retries/visit"
)

// VisitOf is what a visit to a file is of: a resume refuses a checkpoint
// made for another, since its continuation tokens mean nothing there and
// the output would mix two corpora.
type VisitOf struct {
	Cluster, Selection, FieldSet string
	// Namespace and DocumentType, both or neither, are those of a visit
	// of one document type (visit.Config's).
	Namespace, DocumentType string
	// URLs are the endpoints visited, as the checkpoint records them:
	// without passwords, in a fixed order.
	URLs []string
	// Output is the path of the file the documents go to.
	Output string
	// Share is the part of the visit this one is, when it is split
	// across processes (visit.Config.Share): each share has its own
	// checkpoint and output.
	Share visit.Share
}

// visitState is the state of a visit's checkpoint (kind "visit"): what is
// visited, the output it goes to, how much of the output the progress
// covers, and the progress.
type visitState struct {
	Version    int            `json:"version"`
	Cluster    string         `json:"cluster"`
	Selection  string         `json:"selection,omitempty"`
	FieldSet   string         `json:"field_set,omitempty"`
	Namespace  string         `json:"namespace,omitempty"`
	Type       string         `json:"document_type,omitempty"`
	Output     string         `json:"output"`
	URLs       []string       `json:"urls,omitempty"` // none in a checkpoint of an older version
	OutputSize int64          `json:"output_size"`
	Documents  int64          `json:"documents"`
	Progress   visit.Progress `json:"progress"`
	Complete   bool           `json:"complete,omitempty"`
	Share      string         `json:"share,omitempty"` // I/W; none for the whole visit
}

// visitSaveEvery is the least time between two checkpoints of a visit:
// what a SIGKILL makes the next visit read again is about that long of it
// (at 18 000 documents a second, a second was 1.18 times the corpus over
// two kills).
const visitSaveEvery = 250 * time.Millisecond

// A Visitor writes the documents a [visit.Client] visits to a file, one
// put a line (WritePage), and with a checkpoint resumes after any end, a
// SIGKILL included, with every document written once: the checkpoint
// holds the output's size with the progress of the pages in it, written
// after the output is synced, at most every 250 ms; a resume cuts the
// output back to that size and visits from that progress.
type Visitor struct {
	path    string
	hold    *hold
	out     *os.File
	w       *bufio.Writer
	st      visitState
	start   Start
	cutFrom int64 // the output's size before the resume cut it back
	cutTo   int64 // and after
	docs    int64 // written by this run
	last    time.Time
}

// OpenVisit opens the output of the visit of, in slices slices, with its
// checkpoint at path (none for ""): a new visit creates the output (or
// truncates it); one resumed from its checkpoint cuts it back to the size
// the checkpoint covers. It refuses a checkpoint of another kind, of
// another visit, or of a visit in other slices, and an output that does
// not agree with its checkpoint: shorter than it covers, or whose part it
// covers does not end a line or holds another count of documents.
//
// With a checkpoint, the Visitor holds it until Close (another run that
// opens it meanwhile gets an error wrapping ErrHeld), and a new visit
// writes it before OpenVisit returns, so that a checkpoint that cannot be
// written is refused before anything is visited.
func OpenVisit(path string, of VisitOf, slices int) (*Visitor, error) {
	v := &Visitor{path: path, st: visitState{Version: 1, Cluster: of.Cluster, Selection: of.Selection, FieldSet: of.FieldSet, Output: of.Output, URLs: of.URLs, Share: shareOf(of.Share),
		Namespace: of.Namespace, Type: of.DocumentType}}
	if err := v.open(slices); err != nil {
		if v.out != nil {
			v.out.Close()
		}
		v.hold.release()
		return nil, err
	}
	return v, nil
}

// open takes the checkpoint's hold and resumes from it, or creates the
// output and writes the first checkpoint.
func (v *Visitor) open(slices int) error {
	if v.path != "" {
		h, c, found, err := holdAndRead(v.path, "visit")
		if err != nil {
			return err
		}
		if v.hold = h; found {
			return v.resume(c, slices)
		}
	}
	out, err := os.Create(v.st.Output)
	if err != nil {
		return err
	}
	v.out, v.w = out, bufio.NewWriterSize(out, 256<<10)
	return v.save(visit.Progress{})
}

// resume reads the checkpoint c of the visit v.st describes, and opens the
// output cut back to the size it covers.
func (v *Visitor) resume(c envelope, nSlices int) error {
	var prev visitState
	if err := c.Decode("visit", &prev); err != nil {
		return err
	}
	st := v.st
	switch {
	case prev.Version != 1:
		return fmt.Errorf("%s is not a checkpoint of a visit", v.path)
	case prev.Cluster != st.Cluster || prev.Selection != st.Selection || prev.FieldSet != st.FieldSet || prev.Output != st.Output ||
		prev.Namespace != st.Namespace || prev.Type != st.Type:
		return fmt.Errorf("%s was made for another visit (the cluster, the selection, the field set, the type or the output differ): remove it to visit again", v.path)
	case prev.URLs != nil && !slices.Equal(prev.URLs, st.URLs):
		return fmt.Errorf("%s was made for a visit of other endpoints: a continuation token of one Vespa means nothing to another, and the output would mix two corpora; give the endpoints it had, or remove it to visit again", v.path)
	}
	if err := checkSlices(v.path, "visit", prev.Progress, nSlices); err != nil {
		return err
	}
	if err := checkShare(v.path, prev.Share, st.Share); err != nil {
		return err
	}
	prev.URLs = st.URLs
	flags := os.O_RDWR
	if prev.OutputSize == 0 {
		flags |= os.O_CREATE // nothing written yet: the output may not be there
	}
	out, err := os.OpenFile(st.Output, flags, 0o666)
	if err != nil {
		return err
	}
	v.out = out
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	if err := checkOutput(out, fi.Size(), prev.OutputSize, prev.Documents); err != nil {
		return fmt.Errorf("%s does not agree with %s: %v: remove both to visit again", st.Output, v.path, err)
	}
	if err := out.Truncate(prev.OutputSize); err != nil {
		return err
	}
	if _, err := out.Seek(prev.OutputSize, io.SeekStart); err != nil {
		return err
	}
	v.w, v.st = bufio.NewWriterSize(out, 256<<10), prev
	v.cutFrom, v.cutTo = fi.Size(), prev.OutputSize
	v.start.Before = prev.Documents // none before the first page
	if prev.Progress.Slices != 0 {
		v.start.Resumed, v.start.Complete = true, prev.Complete
	}
	return nil
}

// checkOutput checks that the first covered bytes of out, of size bytes,
// are docs whole lines: a checkpoint's cut falls after a newline and
// agrees with its count, or a resume would cut a document in two, or
// leave documents out.
func checkOutput(out *os.File, size, covered, docs int64) error {
	if size < covered {
		return fmt.Errorf("it holds %d bytes, fewer than the %d the checkpoint covers", size, covered)
	}
	buf := make([]byte, 1<<20)
	var lines int64
	var last byte
	for off := int64(0); off < covered; {
		n, err := out.ReadAt(buf[:min(int64(len(buf)), covered-off)], off)
		lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if n > 0 {
			last = buf[n-1]
		}
		off += int64(n)
		if err != nil && off < covered {
			return err
		}
	}
	switch {
	case covered > 0 && last != '\n':
		return fmt.Errorf("the %d bytes the checkpoint covers end within a line", covered)
	case lines != docs:
		return fmt.Errorf("the %d bytes the checkpoint covers hold %d lines, where it counts %d documents", covered, lines, docs)
	}
	return nil
}

// Start returns what OpenVisit found at the checkpoint; its Before is the
// documents in the output the resume kept.
func (v *Visitor) Start() Start { return v.start }

// Cut returns the output's size before the resume and after it: what was
// written after the checkpoint is cut away, and visited again. from is
// to when nothing was cut.
func (v *Visitor) Cut() (from, to int64) { return v.cutFrom, v.cutTo }

// Documents returns the documents in the output: those written before
// the visit resumed, and this run's.
func (v *Visitor) Documents() int64 { return v.start.Before + v.docs }

// Run visits with c from where the checkpoint left off, writes each page's
// documents to the output, calls page, if not nil, after each, and keeps
// the checkpoint, until every slice is visited, c's Visit returns an
// error, or ctx ends; the output is flushed and the checkpoint written
// last. It returns the visit's error, or the first error writing the
// output or the checkpoint. A Visitor runs once.
func (v *Visitor) Run(ctx context.Context, c *visit.Client, page func(visit.Page)) error {
	p, err := c.Visit(ctx, v.st.Progress, func(pg visit.Page) error {
		if err := WritePage(v.w, pg); err != nil {
			return fmt.Errorf("writing the output: %w", err)
		}
		v.docs += int64(len(pg.Documents))
		if page != nil {
			page(pg)
		}
		if now := time.Now(); now.Sub(v.last) >= visitSaveEvery {
			v.last = now
			if err := v.save(pg.Progress); err != nil {
				return fmt.Errorf("writing the output or the checkpoint: %w", err)
			}
		}
		return nil
	})
	if serr := v.save(p); serr != nil && err == nil {
		err = fmt.Errorf("writing the output or the checkpoint: %w", serr)
	}
	return err
}

// save makes what was written durable, then the checkpoint that covers
// it: the output's size and the progress of the pages in it.
func (v *Visitor) save(p visit.Progress) error {
	if err := v.w.Flush(); err != nil {
		return err
	}
	if v.path == "" {
		return nil
	}
	if err := v.out.Sync(); err != nil {
		return err
	}
	size, err := v.out.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	v.st.OutputSize, v.st.Documents, v.st.Progress, v.st.Complete = size, v.Documents(), p, p.Complete()
	return writeEnvelope(v.path, "visit", v.st)
}

// Close closes the output and lets the checkpoint go, for another run to
// take up.
func (v *Visitor) Close() error {
	err := v.out.Close()
	return cmp.Or(err, v.hold.release())
}

// WritePage writes the documents of pg to w, one a line, as puts that
// vespa feed and retries feed read: {"put":"id:…","fields":{…}}.
func WritePage(w io.Writer, pg visit.Page) error {
	for _, d := range pg.Documents {
		id, err := json.Marshal(d.ID)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, `{"put":%s,"fields":%s}`+"\n", id, fieldsOrEmpty(d.Fields)); err != nil {
			return err
		}
	}
	return nil
}
