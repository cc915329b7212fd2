package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seed32e55400/retries/visit"
)

// envelopeVersion is the version of the checkpoint file's envelope that
// writeEnvelope writes.
const envelopeVersion = 1

// envelope is a checkpoint file: the kind of job whose state it holds
// ("feed", "visit", "copy", or a program's own), and the state, which the
// job's code reads with Decode. On disk it is one JSON object:
//
//	{"checkpoint": 1, "kind": "copy", "state": {…}}
//
// The checkpoints that retries feed, visit and copy wrote before this
// envelope (a job's state alone, with no "checkpoint" key) are read too:
// their kind is told from their fields.
type envelope struct {
	Version int             `json:"checkpoint"`
	Kind    string          `json:"kind"`
	State   json.RawMessage `json:"state"`
	path    string
}

// ErrNotCheckpoint is what readEnvelope returns, wrapped with the
// file's path, for a file that is not a checkpoint this version reads.
var ErrNotCheckpoint = errors.New("not a checkpoint of this version of package resume")

// readEnvelope reads the checkpoint file at path. A missing file is an
// error matching fs.ErrNotExist.
func readEnvelope(path string) (envelope, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return envelope{}, err
	}
	var c envelope
	if err := json.Unmarshal(data, &c); err != nil {
		return envelope{}, fmt.Errorf("%s: %w", path, ErrNotCheckpoint)
	}
	c.path = path
	if c.Version == 0 {
		// A checkpoint written before the envelope: the state alone.
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(data, &fields)
		switch {
		case fields["version"] == nil:
		case fields["size"] != nil && fields["offset"] != nil:
			c.Kind = "feed"
		case fields["output"] != nil:
			c.Kind = "visit"
		case fields["cluster"] != nil && fields["progress"] != nil:
			c.Kind = "copy"
		}
		c.State = data
	}
	if c.Version > envelopeVersion || c.Kind == "" || len(c.State) == 0 {
		return envelope{}, fmt.Errorf("%s: %w", path, ErrNotCheckpoint)
	}
	return c, nil
}

// Decode reads the state of a checkpoint of kind into v, as
// json.Unmarshal does, or returns an error that names the kind the
// checkpoint is of when it is another.
func (c envelope) Decode(kind string, v any) error {
	if c.Kind != kind {
		return fmt.Errorf("%s is a checkpoint of %s, not of %s", c.path, describe(c.Kind), describe(kind))
	}
	if err := json.Unmarshal(c.State, v); err != nil {
		return fmt.Errorf("%s: %w: %v", c.path, ErrNotCheckpoint, err)
	}
	return nil
}

// describe names the job of a kind: "a visit", "an update".
func describe(kind string) string {
	switch kind {
	case "feed", "visit", "copy", "delete":
		return "a " + kind
	case "update":
		return "an update"
	}
	return fmt.Sprintf("%q", kind)
}

// writeEnvelope writes state, a job of kind's, as the checkpoint file at
// path, whole or not at all (see writeFile).
func writeEnvelope(path, kind string, state any) error {
	s, err := json.Marshal(state)
	if err != nil {
		return err
	}
	data, err := json.Marshal(envelope{Version: envelopeVersion, Kind: kind, State: s})
	if err != nil {
		return err
	}
	return writeFile(path, append(data, '\n'))
}

// writeFile writes data to path whole, or leaves path as it was: it writes
// a temporary file beside it, syncs it, renames it over path and syncs the
// directory, so that after a crash at any point path holds the old data or
// the new.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkSlices refuses to resume a checkpoint of kind, at path, whose
// progress p is of other slices than n: a continuation token holds only
// for its slicing. A progress of no slices (nothing visited yet) fits any.
func checkSlices(path, kind string, p visit.Progress, n int) error {
	if p.Slices != 0 && p.Slices != n {
		return fmt.Errorf("%s is of %s in %d slices: give %d slices (a continuation token holds only for its slicing)", path, describe(kind), p.Slices, p.Slices)
	}
	return nil
}

// shareOf is how a checkpoint records s: "" for the whole job.
func shareOf(s visit.Share) string {
	if s.Of <= 1 {
		return ""
	}
	return s.String()
}

// checkShare refuses to resume the checkpoint at path, of the share had
// ("" for the whole job), as the share want: each share has its own
// checkpoint.
func checkShare(path, had, want string) error {
	if had == want {
		return nil
	}
	name := func(s string) string {
		if s == "" {
			return "the whole job"
		}
		return "share " + s
	}
	return fmt.Errorf("%s is the checkpoint of %s, not of %s: each share has its own checkpoint", path, name(had), name(want))
}
