package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// visitCheckpoint is the state of a visit's checkpoint as the tests read
// and write it (resume.Visitor's, kind "visit").
type visitCheckpoint struct {
	Version    int            `json:"version"`
	Cluster    string         `json:"cluster"`
	Selection  string         `json:"selection,omitempty"`
	FieldSet   string         `json:"field_set,omitempty"`
	Output     string         `json:"output"`
	URLs       []string       `json:"urls,omitempty"`
	OutputSize int64          `json:"output_size"`
	Documents  int64          `json:"documents"`
	Progress   visit.Progress `json:"progress"`
	Complete   bool           `json:"complete,omitempty"`
}

// TestVisitFiles: -o and -checkpoint naming one file are refused (exit 2,
// and the file untouched): the visit used to write its checkpoint over its
// output, and exit 0; a visit the server refuses (an unknown cluster)
// leaves no file behind, where it left an empty -o.
func TestVisitFiles(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 100, 4, nil)
	dir := t.TempDir()
	same := filepath.Join(dir, "docs.jsonl")
	if err := os.WriteFile(same, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ck := range []string{same, filepath.Join(dir, ".", "docs.jsonl")} {
		code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-o", same, "-checkpoint", ck)
		if data, _ := os.ReadFile(same); code != exitUsage || !strings.Contains(stderr, "-o and -checkpoint name the same file") || string(data) != "kept\n" {
			t.Errorf("-checkpoint %s: exit %d, file %q, stderr:\n%s\nwant 2 and the file untouched", ck, code, data, stderr)
		}
	}
	out, ck := filepath.Join(dir, "new.jsonl"), filepath.Join(dir, "ck.json")
	code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "nope", "-o", out, "-checkpoint", ck)
	if code != exitUsage || !strings.Contains(stderr, "no content cluster 'nope'") {
		t.Errorf("an unknown cluster: exit %d, stderr:\n%s", code, stderr)
	}
	for _, p := range []string{out, ck} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("an unknown cluster left %s behind (%v)", p, err)
		}
	}
}

// TestCheckpointEndpoints: a checkpoint is refused by a command given
// other endpoints (a visit's -url, a copy's -from or -to), saying which
// differ, and accepted with the same ones in another order, with a
// trailing slash or another password; it records no password. A visit
// resumed against another server used to mix two corpora in its output,
// and a copy resumed to another destination left it without what went to
// the first.
func TestCheckpointEndpoints(t *testing.T) {
	t.Parallel()
	a, b := visittest.New(t, 3000, 64, nil), visittest.New(t, 3000, 64, nil)
	dstA, dstB := feedtest.New(t, nil), feedtest.New(t, nil)
	dir := t.TempDir()
	out, ck := filepath.Join(dir, "docs.jsonl"), filepath.Join(dir, "ck.json")
	withUser := strings.Replace(a.URL, "http://", "http://u:secret1@", 1)
	// A checkpoint part way: the visit ended by a page function error is
	// not at hand from the command, so one is written as a run left it.
	args := []string{"visit", "-q", "-url", withUser, "-url", b.URL, "-cluster", "music", "-o", out, "-checkpoint", ck}
	if code, _, stderr := runCmd(t, args...); code != 0 {
		t.Fatalf("the visit: exit %d\n%s", code, stderr)
	}
	data, _ := os.ReadFile(ck)
	if bytes.Contains(data, []byte("secret1")) {
		t.Errorf("the checkpoint holds the password: %s", data)
	}
	var vc visitCheckpoint
	if err := readState(ck, "visit", &vc); err != nil {
		t.Fatal(err)
	}
	vc.Complete, vc.Progress.Done[0] = false, false // as if interrupted
	data, _ = json.Marshal(vc)
	if err := os.WriteFile(ck, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "visit", "-q", "-url", b.URL, "-cluster", "music", "-o", out, "-checkpoint", ck)
	if code != exitUsage || !strings.Contains(stderr, "a visit of other endpoints") {
		t.Errorf("a visit resumed against one endpoint of two: exit %d, stderr:\n%s\nwant 2, -url differs", code, stderr)
	}
	// A line appended by hand is cut away on resume, and the command says
	// so (it used to cut it without a word).
	f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("{\"put\":\"id:by:hand::1\",\"fields\":{}}\n")
	f.Close()
	other := strings.Replace(a.URL, "http://", "http://u:secret2@", 1) + "/"
	code, _, stderr = runCmd(t, "visit", "-q", "-url", b.URL, "-url", other, "-cluster", "music", "-o", out, "-checkpoint", ck)
	if code != 0 || !strings.Contains(stderr, "docs.jsonl cut from ") || !strings.Contains(stderr, "what was written after the checkpoint is visited again") {
		t.Errorf("the same endpoints in another order, a line appended: exit %d, stderr:\n%s", code, stderr)
	}

	ck = filepath.Join(dir, "copy.json")
	cc := copyCheckpoint{Version: 1, Cluster: "music", From: endpoints([]string{a.URL}), To: endpoints([]string{dstA.URL}), Documents: 10,
		Progress: vc.Progress}
	data, _ = json.Marshal(cc)
	if err := os.WriteFile(ck, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{b.URL, dstA.URL, "a copy from other endpoints"},
		{a.URL, dstB.URL, "a copy to other endpoints"},
	} {
		code, _, stderr := runCmd(t, "copy", "-q", "-from", tc.from, "-to", tc.to, "-cluster", "music", "-slices", "8", "-checkpoint", ck)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("a copy resumed with %s: exit %d, stderr:\n%s", tc.want, code, stderr)
		}
	}
	if len(dstB.Applied()) != 0 {
		t.Errorf("the refused copy sent %d puts to the other destination", len(dstB.Applied()))
	}
}

// TestCheckpointOfAnotherCommand: each command given the checkpoint of
// another says whose it is (exit 2), and leaves it as it was.
func TestCheckpointOfAnotherCommand(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 10, 2, nil)
	dst := feedtest.New(t, nil)
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(`{"put":"id:music:music::1","fields":{}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := map[string][]string{
		"feed":  {"feed", "-q", "-url", dst.URL, input},
		"visit": {"visit", "-q", "-url", srv.URL, "-cluster", "music", "-o", filepath.Join(dir, "out.jsonl")},
		"copy":  {"copy", "-q", "-from", srv.URL, "-to", dst.URL, "-cluster", "music"},
	}
	for made, args := range runs {
		ck := filepath.Join(dir, made+".ck")
		if code, _, stderr := runCmd(t, append(args, "-checkpoint", ck)...); code != 0 {
			t.Fatalf("%s: exit %d:\n%s", made, code, stderr)
		}
		before, _ := os.ReadFile(ck)
		for other, args := range runs {
			if other == made {
				continue
			}
			code, _, stderr := runCmd(t, append(args, "-checkpoint", ck)...)
			want := ck + " is a checkpoint of " + article(made) + ", not of " + article(other)
			if after, _ := os.ReadFile(ck); code != exitUsage || !strings.Contains(stderr, want) || !bytes.Equal(before, after) {
				t.Errorf("%s with %s's checkpoint: exit %d, stderr:\n%s\nwant 2, %q and the checkpoint untouched", other, made, code, stderr, want)
			}
		}
	}
}

// article names a command's job as package resume does: "a visit".
func article(kind string) string { return "a " + kind }
