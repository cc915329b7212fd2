package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// copyCheckpoint is the state of a copy's checkpoint as the tests read and
// write it (resume.Copier's, kind "copy").
type copyCheckpoint struct {
	Version   int            `json:"version"`
	Cluster   string         `json:"cluster"`
	Selection string         `json:"selection,omitempty"`
	FieldSet  string         `json:"field_set,omitempty"`
	From      []string       `json:"from,omitempty"`
	To        []string       `json:"to,omitempty"`
	Documents int64          `json:"documents"`
	Progress  visit.Progress `json:"progress"`
	Complete  bool           `json:"complete,omitempty"`
}

// appliedPuts returns how often dst applied a put of each document, and
// fails t unless each carries the fields visittest gives it ({"n": N}).
func appliedPuts(t *testing.T, dst *feedtest.Server) (map[int]int, []int) {
	t.Helper()
	count, order := map[int]int{}, []int(nil)
	for _, a := range dst.Applied() {
		method, rest, _ := strings.Cut(a, " ")
		path, body, _ := strings.Cut(rest, " ")
		path, _, _ = strings.Cut(path, "?")
		var n int
		if _, err := fmt.Sscanf(path, "/document/v1/music/music/docid/%d", &n); err != nil || method != http.MethodPost {
			t.Errorf("applied %q: not a put of a document of the corpus", a)
			continue
		}
		var b struct{ Fields struct{ N *int } }
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.Fields.N == nil || *b.Fields.N != n {
			t.Errorf("applied %q: want the fields {\"n\":%d}", a, n)
		}
		count[n]++
		order = append(order, n)
	}
	return count, order
}

// checkCopied fails t unless every one of n documents was applied.
func checkCopied(t *testing.T, count map[int]int, n int) {
	t.Helper()
	lost := 0
	for d := range n {
		if count[d] == 0 {
			lost++
		}
	}
	if lost > 0 || len(count) != n {
		t.Errorf("%d of %d documents never applied, %d in all", lost, n, len(count))
	}
}

// TestCopyCommand: retries copy visits a source whose pages are cut short
// now and then, and feeds a destination that fails a tenth of its
// requests: every document is applied with its fields, the slices'
// documents interleaved (in slice order, nearly every put would follow
// one of its own slice), and the copy exits 0.
func TestCopyCommand(t *testing.T) {
	t.Parallel()
	src := visittest.New(t, 4000, 256, func(_ *http.Request, n int) int {
		if n%10 == 3 {
			return visittest.CutAfter(3 + 97*n%500)
		}
		return 0
	})
	dst := feedtest.New(t, func(_ *http.Request, n int) int {
		switch n % 20 {
		case 5:
			return http.StatusServiceUnavailable
		case 11:
			return feedtest.Reset
		}
		return 0
	})
	ck := filepath.Join(t.TempDir(), "ck.json")
	var stdout, stderr bytes.Buffer
	// Two puts in flight: the destination is slower than the source, as a
	// copy's usually is, so that pages of several slices wait their turn.
	args := []string{"-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-slices", "4", "-checkpoint", ck, "-concurrency", "2"}
	if err := runCopy(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("runCopy() = %v; stderr:\n%s", err, stderr.String())
	}
	count, order := appliedPuts(t, dst)
	checkCopied(t, count, 4000)
	same := 0 // puts from the slice of the put before
	for i := 1; i < len(order); i++ {
		if order[i]%256%4 == order[i-1]%256%4 {
			same++
		}
	}
	if share := float64(same) / float64(len(order)-1); share > 0.7 {
		t.Errorf("%.0f %% of the puts came from the slice of the put before: not interleaved", 100*share)
	}
	var c copyCheckpoint
	if err := readState(ck, "copy", &c); err != nil || !c.Complete || c.Documents != 4000 {
		t.Errorf("the checkpoint: %+v, %v; want complete after 4000 documents", c, err)
	}
	stderr.Reset()
	if err := runCopy(t.Context(), args, &stdout, &stderr); err != nil || !strings.Contains(stderr.String(), "complete: nothing to copy") {
		t.Errorf("the copy again: %v, %s; want nothing to copy", err, stderr.String())
	}
}

// TestCopyKilledTwice: a copy SIGKILLed twice, each time once its
// checkpoint has moved and then been saved again while the destination
// holds some of its puts unanswered (and unapplied), and then run to its
// end with the same command, applies every document: the checkpoint never
// moved past a document not acknowledged.
func TestCopyKilledTwice(t *testing.T) {
	t.Parallel()
	const docs = 20000
	src := visittest.New(t, docs, 1024, nil)
	var blocking atomic.Bool
	var release atomic.Pointer[chan struct{}]
	blocked := make(chan struct{}, 1<<16)
	dst := feedtest.New(t, func(*http.Request, int) int {
		if blocking.Load() {
			ch := *release.Load()
			blocked <- struct{}{}
			<-ch // the process is killed meanwhile
			return http.StatusServiceUnavailable
		}
		return 0
	})
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.json")
	args := []string{"copy", "-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-slices", "4", "-checkpoint", ck}
	written := renames(t, dir)
	var exited chan struct{}
	saved := func() copyCheckpoint {
		for name := ""; name != "ck.json"; {
			select {
			case name = <-written:
			case <-exited:
				t.Fatal("the copy ended before it was killed")
			}
		}
		var c copyCheckpoint
		err := readState(ck, "copy", &c)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for kill := range 2 {
		ch := make(chan struct{})
		release.Store(&ch)
		cmd := startProcess(t, newSyncBuffer(), args...)
		exited = make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		for saved().Documents <= int64(kill+1)*docs/10 {
		}
		blocking.Store(true)
		for range 8 {
			<-blocked
		}
		saved()
		saved() // a save begun after the puts were held
		_ = cmd.Process.Kill()
		<-exited
		blocking.Store(false)
		close(ch)
	}
	var stdout, stderr bytes.Buffer
	if err := runCopy(context.Background(), args[1:], &stdout, &stderr); err != nil {
		t.Fatalf("the resumed copy: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "resuming from") {
		t.Errorf("the last copy did not resume: %s", stderr.String())
	}
	// Its last line counts the copies before too.
	if want := fmt.Sprintf("; %d in all, with the copies before the resume\n", docs); !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("the last copy's last line, want it to end %q: %s", want, stderr.String())
	}
	count, _ := appliedPuts(t, dst)
	checkCopied(t, count, docs)
	t.Logf("the source sent %d documents for %d", src.Sent(), docs)
}

// TestCopyFailed: documents the destination refuses go to -failed, in
// feed format, the checkpoint moves past them, and the copy exits 1;
// without -failed, the checkpoint stays before the first refused.
func TestCopyFailed(t *testing.T) {
	t.Parallel()
	bad := func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/docid/7") || strings.HasSuffix(r.URL.Path, "/docid/700") {
			return http.StatusBadRequest
		}
		return 0
	}
	src := visittest.New(t, 1000, 16, nil)
	for _, withFailed := range []bool{true, false} {
		dst := feedtest.New(t, bad)
		dir := t.TempDir()
		ck, failed := filepath.Join(dir, "ck.json"), filepath.Join(dir, "failed.jsonl")
		args := []string{"-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-slices", "2", "-checkpoint", ck}
		if withFailed {
			args = append(args, "-failed", failed)
		}
		var stdout, stderr bytes.Buffer
		if err := runCopy(t.Context(), args, &stdout, &stderr); err != errSilent {
			t.Fatalf("-failed %v: runCopy() = %v, want exit 1; stderr:\n%s", withFailed, err, stderr.String())
		}
		var c copyCheckpoint
		if err := readState(ck, "copy", &c); err != nil {
			t.Fatalf("the checkpoint: %v", err)
		}
		if !withFailed {
			if c.Complete || c.Documents >= 1000 {
				t.Errorf("without -failed: the checkpoint %+v moved past refused documents", c)
			}
			continue
		}
		if !c.Complete || c.Documents != 1000 {
			t.Errorf("with -failed: the checkpoint %+v, want complete after 1000", c)
		}
		f, err := os.Open(failed)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for op, err := range feed.Read(f) {
			if err != nil || op.Kind != feed.Put || len(op.Fields) == 0 {
				t.Errorf("-failed: %+v, %v: want puts with their fields", op, err)
			}
			ids = append(ids, op.ID)
		}
		f.Close()
		if len(ids) != 2 || !strings.Contains(strings.Join(ids, " "), "::700") {
			t.Errorf("-failed holds %v, want the two refused", ids)
		}
	}
}

// TestCopyOtherSlicing: a checkpoint of a copy in 2 slices is refused by
// the same command with -slices 3, with what to give (exit 2).
func TestCopyOtherSlicing(t *testing.T) {
	t.Parallel()
	src := visittest.New(t, 300, 8, nil)
	dst := feedtest.New(t, nil)
	ck := filepath.Join(t.TempDir(), "ck.json")
	data, _ := json.Marshal(copyCheckpoint{Version: 1, Cluster: "music", Progress: visit.Progress{Slices: 2, Tokens: []string{"", "x"}, Done: []bool{true, false}}})
	if err := os.WriteFile(ck, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "copy", "-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-slices", "3", "-checkpoint", ck)
	if code != exitUsage || !strings.Contains(stderr, "is of a copy in 2 slices") {
		t.Errorf("exit %d, stderr %q; want 2 and -slices 2", code, stderr)
	}
}
