package resume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// TestCheckpointHeld: each engine holds its checkpoint from its Open to
// its Close: a second Open of the same checkpoint meanwhile, by any
// engine, fails at once with ErrHeld, naming this process; after Close
// the checkpoint opens again.
func TestCheckpointHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(`{"put":"id:a:b::1","fields":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	engines := map[string]func(path string) (io.Closer, error){
		"bulk": func(path string) (io.Closer, error) {
			return resume.OpenBulk(path, resume.BulkOf{Cluster: "music", Selection: "true"}, 4)
		},
		"visit": func(path string) (io.Closer, error) {
			return resume.OpenVisit(path, resume.VisitOf{Cluster: "music", Output: path + ".out"}, 4)
		},
		"copy": func(path string) (io.Closer, error) { return resume.OpenCopy(path, resume.CopyOf{Cluster: "music"}, 4) },
		"feed": func(path string) (io.Closer, error) {
			in, err := os.Open(input)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { in.Close() })
			return resume.OpenFileFeed(resume.FileFeedConfig{Input: in, Checkpoint: path})
		},
	}
	for name, open := range engines {
		path := filepath.Join(dir, name+".json")
		first, err := open(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for other, open2 := range engines {
			_, err := open2(path)
			if !errors.Is(err, resume.ErrHeld) || !strings.Contains(err.Error(), fmt.Sprintf("process %d on ", os.Getpid())) {
				t.Errorf("%s held, opened by %s: %v; want ErrHeld naming this process", name, other, err)
			}
		}
		if err := first.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		again, err := open(path)
		if err != nil {
			t.Fatalf("%s after Close: %v", name, err)
		}
		again.Close()
	}
}

// TestBulkRunIDOnDiskAtOpen: a new run's checkpoint, with its run id, is
// written by OpenBulk, before any request; opened again (a run killed
// before its first answer), it is the same run.
func TestBulkRunIDOnDiskAtOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ck.json")
	of := resume.BulkOf{Cluster: "music", Selection: "true", Update: json.RawMessage(`{"fields":{"n":{"increment":1}}}`),
		Namespace: "music", DocumentType: "music", Marker: "run"}
	b, err := resume.OpenBulk(path, of, 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := resume.ReadEnvelope(path)
	if err != nil {
		t.Fatalf("no checkpoint after OpenBulk: %v", err)
	}
	var st struct{ Run string }
	if err := c.Decode("update", &st); err != nil || st.Run != b.RunID() || st.Run == "" {
		t.Errorf("the checkpoint's run %q (%v), want %q", st.Run, err, b.RunID())
	}
	b.Close()
	b2, err := resume.OpenBulk(path, of, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.RunID() != b.RunID() {
		t.Errorf("opened again: run %q, want %q", b2.RunID(), b.RunID())
	}
	if _, err := resume.OpenBulk(filepath.Join(t.TempDir(), "missing", "ck.json"), of, 4); err == nil {
		t.Error("a checkpoint in a missing directory: taken")
	}
}

// TestVisitorRefusesOutputAtOdds: a checkpoint whose output size falls
// within a line, or covers another count of documents than it says, is
// refused by OpenVisit, and the output is left as it was: a resume would
// otherwise cut a document in two, or leave documents out with exit 0.
func TestVisitorRefusesOutputAtOdds(t *testing.T) {
	t.Parallel()
	src := visittest.New(t, 500, 16, nil)
	dir := t.TempDir()
	of := resume.VisitOf{Cluster: "music", URLs: []string{src.URL}, Output: filepath.Join(dir, "docs.jsonl")}
	path := filepath.Join(dir, "visit.json")
	v, err := resume.OpenVisit(path, of, 4)
	if err != nil {
		t.Fatal(err)
	}
	c, err := visit.New(visit.Config{URLs: of.URLs, Cluster: of.Cluster, Slices: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	v.Close()
	out, err := os.ReadFile(of.Output)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lastLine := bytes.LastIndexByte(out[:len(out)-1], '\n') + 1
	for _, tc := range []struct {
		size int
		want string
	}{
		{len(out) - 10, "end within a line"},
		{lastLine, "where it counts 500 documents"},
	} {
		var env map[string]json.RawMessage
		var st map[string]any
		if err := json.Unmarshal(ck, &env); err != nil || json.Unmarshal(env["state"], &st) != nil {
			t.Fatalf("the checkpoint %s: %v", ck, err)
		}
		st["output_size"], st["complete"] = tc.size, false
		env["state"], _ = json.Marshal(st)
		data, _ := json.Marshal(env)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if v, err := resume.OpenVisit(path, of, 4); err == nil || !strings.Contains(err.Error(), tc.want) {
			if err == nil {
				v.Close()
			}
			t.Errorf("output_size %d: %v, want it refused (%q)", tc.size, err, tc.want)
		}
		if now, _ := os.ReadFile(of.Output); !bytes.Equal(now, out) {
			t.Errorf("output_size %d: the output was changed (%d bytes, was %d)", tc.size, len(now), len(out))
		}
	}
}
