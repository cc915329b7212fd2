package resume_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/resume"
)

// TestCheckpointFormats: a checkpoint written with WriteEnvelope reads
// back as its kind and state; the checkpoints of retries feed, visit and
// copy from before the envelope read as their kinds; a checkpoint of
// another kind is refused with a message that names both; anything else
// is ErrNotCheckpoint, and a missing file fs.ErrNotExist.
func TestCheckpointFormats(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck")
	type state struct {
		Version int    `json:"version"`
		Cluster string `json:"cluster"`
	}
	if err := resume.WriteEnvelope(path, "copy", state{1, "music"}); err != nil {
		t.Fatal(err)
	}
	c, err := resume.ReadEnvelope(path)
	if err != nil {
		t.Fatal(err)
	}
	var s state
	if err := c.Decode("copy", &s); err != nil || s != (state{1, "music"}) || c.Version != resume.EnvelopeVersion {
		t.Errorf("read back: %+v, %+v, %v", c, s, err)
	}
	if err := c.Decode("visit", &s); err == nil || err.Error() != path+" is a checkpoint of a copy, not of a visit" {
		t.Errorf("Decode as another kind: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the checkpoint alone (no temporary file left)", len(entries))
	}

	for _, tc := range []struct{ data, kind string }{
		{`{"version":2,"size":1000,"array":false,"tail":{},"offset":0,"line":1,"reserved":null}`, "feed"},
		{`{"version":1,"size":1000,"head":"ab","offset":10,"line":2,"reserved":3}`, "feed"},
		{`{"version":1,"cluster":"music","output":"out.jsonl","output_size":0,"documents":0,"progress":{}}`, "visit"},
		{`{"version":1,"cluster":"music","documents":0,"progress":{"slices":2}}`, "copy"},
	} {
		if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := resume.ReadEnvelope(path)
		if err != nil || c.Kind != tc.kind || string(c.State) != tc.data {
			t.Errorf("%s: read as %q (%v), want %q with the file as its state", tc.data, c.Kind, err, tc.kind)
		}
	}

	for _, data := range []string{``, `[]`, `{"version":1}`, `{"a":1}`, `{"checkpoint":2,"kind":"feed","state":{}}`, `{"checkpoint":1,"state":{}}`} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := resume.ReadEnvelope(path); !errors.Is(err, resume.ErrNotCheckpoint) || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("%q: %v, want ErrNotCheckpoint naming the file", data, err)
		}
	}
	if _, err := resume.ReadEnvelope(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
