package resume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/seed32e55400/retries/visit"
)

// BulkOf is what a delete or an update by selection is of: a resume
// refuses a checkpoint made for another, since its continuation tokens,
// its run's marker and its count mean nothing there.
type BulkOf struct {
	Cluster, Selection string
	// Update is the update applied to each document; nil for a delete.
	Update                          json.RawMessage
	Namespace, DocumentType, Marker string
	// URLs are the endpoints, as the checkpoint records them: without
	// passwords, in a fixed order.
	URLs []string
	// Share is the part of the run this one is, when it is split across
	// processes (visit.Config.Share): each share has its own checkpoint,
	// and its own run id.
	Share visit.Share
}

// kind is the checkpoint's kind: "delete" or "update".
func (of BulkOf) kind() string {
	if of.Update != nil {
		return "update"
	}
	return "delete"
}

// bulkState is the state of a delete's or an update's checkpoint.
type bulkState struct {
	Version      int             `json:"version"`
	Cluster      string          `json:"cluster"`
	Selection    string          `json:"selection"`
	Update       json.RawMessage `json:"update,omitempty"`
	Namespace    string          `json:"namespace,omitempty"`
	DocumentType string          `json:"document_type,omitempty"`
	Marker       string          `json:"marker,omitempty"`
	Run          string          `json:"run"`
	URLs         []string        `json:"urls"`
	Processed    int64           `json:"processed"` // the documents the server said it processed, runs before a resume included
	Progress     visit.Progress  `json:"progress"`
	Complete     bool            `json:"complete,omitempty"`
	Share        string          `json:"share,omitempty"` // I/W; none for the whole run
}

// A Bulk keeps the checkpoint of a delete or an update by selection
// (visit.Config.Process): the run's id, which a marker writes into each
// document updated, each slice's token and the count, written after each
// request's answer, so that the same run goes on where it stopped after
// an interrupt, a SIGKILL or an outage, with its marker: exactly once.
type Bulk struct {
	path  string
	hold  *hold
	kind  string // "delete" or "update"
	st    bulkState
	start Start
}

// OpenBulk returns the Bulk of the run of, in slices slices, with its
// checkpoint at path (none for ""): resumed from there if the file exists
// and is of this run, or new, with a new run id. It refuses a checkpoint
// of another kind, of another run, or of other slices.
//
// With a checkpoint, the Bulk holds it until Close (another run that opens
// it meanwhile gets an error wrapping ErrHeld), and a new run writes it
// before OpenBulk returns: its run id, which a marker writes into each
// document updated, is on disk before the first request, and a checkpoint
// that cannot be written is refused before anything is sent.
func OpenBulk(path string, of BulkOf, slices int) (*Bulk, error) {
	st := bulkState{Version: 1, Cluster: of.Cluster, Selection: of.Selection, Update: compactJSON(of.Update), Namespace: of.Namespace,
		DocumentType: of.DocumentType, Marker: of.Marker, URLs: of.URLs, Share: shareOf(of.Share)}
	b := &Bulk{path: path, kind: of.kind(), st: st}
	if err := b.open(slices); err != nil {
		b.hold.release()
		return nil, err
	}
	return b, nil
}

// open takes the checkpoint's hold and resumes from it, or starts a new
// run and writes its first checkpoint.
func (b *Bulk) open(slices int) error {
	if b.path != "" {
		h, c, found, err := holdAndRead(b.path, b.kind)
		if err != nil {
			return err
		}
		if b.hold = h; found {
			return b.resume(c, slices)
		}
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	b.st.Run = hex.EncodeToString(id)
	return b.save(visit.Progress{})
}

// Close lets the checkpoint go, for another run to take up.
func (b *Bulk) Close() error { return b.hold.release() }

// resume takes up the checkpoint c.
func (b *Bulk) resume(c envelope, nSlices int) error {
	kind := b.kind
	var prev bulkState
	if err := c.Decode(kind, &prev); err != nil {
		return err
	}
	st := b.st
	switch {
	case prev.Version != 1 || prev.Run == "":
		return fmt.Errorf("%s is not a checkpoint of %s", b.path, describe(kind))
	case prev.Cluster != st.Cluster || prev.Selection != st.Selection || string(prev.Update) != string(st.Update) ||
		prev.Namespace != st.Namespace || prev.DocumentType != st.DocumentType || prev.Marker != st.Marker:
		return fmt.Errorf("%s was made for another %s (the cluster, the selection, the update, the type or the marker differ): remove it to start again", b.path, kind)
	case !slices.Equal(prev.URLs, st.URLs):
		return fmt.Errorf("%s was made for a %s through other endpoints: a continuation token of one Vespa means nothing to another; give the endpoints it had, or remove it to start again", b.path, kind)
	}
	if err := checkSlices(b.path, kind, prev.Progress, nSlices); err != nil {
		return err
	}
	if err := checkShare(b.path, prev.Share, st.Share); err != nil {
		return err
	}
	b.st, b.start = prev, Start{Resumed: true, Complete: prev.Complete, Before: prev.Processed}
	return nil
}

// compactJSON returns j compacted, so that an update given twice with other
// spaces is the same; nil for nil.
func compactJSON(j json.RawMessage) json.RawMessage {
	if j == nil {
		return nil
	}
	var v any
	if json.Unmarshal(j, &v) != nil {
		return j
	}
	out, _ := json.Marshal(v)
	return out
}

// RunID returns the run's id: the marker's value for an update with one
// (visit.Process.Run). A resumed run keeps its id.
func (b *Bulk) RunID() string { return b.st.Run }

// Start returns what OpenBulk found at the checkpoint.
func (b *Bulk) Start() Start { return b.start }

// Processed returns the documents the server said it processed: those
// before the run resumed, and since.
func (b *Bulk) Processed() int64 { return b.st.Processed }

// Run processes with c, a visit.Client made with a visit.Config.Process
// of this run (its Run the RunID), from where the checkpoint left off,
// calls page, if not nil, after each answer, and writes the checkpoint
// after each, until every slice is done, c's Visit returns an error, or
// ctx ends. It returns the visit's error, or the first error writing the
// checkpoint.
func (b *Bulk) Run(ctx context.Context, c *visit.Client, page func(visit.Page)) error {
	p, err := c.Visit(ctx, b.st.Progress, func(pg visit.Page) error {
		b.st.Processed += int64(pg.Processed)
		if page != nil {
			page(pg)
		}
		if err := b.save(pg.Progress); err != nil {
			return fmt.Errorf("writing the checkpoint: %w", err)
		}
		return nil
	})
	if serr := b.save(p); serr != nil && err == nil {
		err = fmt.Errorf("writing the checkpoint: %w", serr)
	}
	return err
}

// save writes the checkpoint at p.
func (b *Bulk) save(p visit.Progress) error {
	b.st.Progress, b.st.Complete = p, p.Complete()
	if b.path == "" {
		return nil
	}
	return writeEnvelope(b.path, b.kind, b.st)
}
