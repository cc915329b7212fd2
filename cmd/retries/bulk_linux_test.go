package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries/visit/visittest"
)

// TestDeleteCommand: retries delete through 500s and cuts after part of a
// chunk, 504s, 503s and 429s deletes every document the selection matches
// and no other, exits 0, says how many on stdout, and -verify finds none
// left.
func TestDeleteCommand(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 4000, 64, visittest.ChunkFaults)
	code, stdout, stderr := runCmd(t, "delete", "-q", "-verify", "-url", srv.URL, "-cluster", "music", "-selection", "music.n % 2 == 0", "-slices", "4")
	if code != 0 || !strings.Contains(stderr, "-verify: no document matches") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for d := range 4000 {
		if srv.IsDeleted(d) != (d%2 == 0) {
			t.Fatalf("document %d: deleted %v", d, srv.IsDeleted(d))
		}
	}
	var sum struct{ Documents, Requests int }
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum.Documents == 0 || sum.Requests == 0 {
		t.Errorf("the summary %q: %v", stdout, err)
	}
}

// TestUpdateCommand: an increment with -marker through the same faults is
// applied to every document the selection matches exactly once, and to
// no other.
func TestUpdateCommand(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 4000, 64, visittest.ChunkFaults)
	code, _, stderr := runCmd(t, "update", "-q", "-verify", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music",
		"-selection", "music.n < 3000", "-update", `{"fields":{"n":{"increment":1}}}`, "-marker", "run", "-slices", "4", "-checkpoint", filepath.Join(t.TempDir(), "ck.json"))
	if code != 0 || !strings.Contains(stderr, "-verify: no document matches") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	updates := srv.Updates()
	for d := range 4000 {
		if want := map[bool]int{true: 1}[d < 3000]; updates[d] != want {
			t.Fatalf("document %d updated %d times, want %d", d, updates[d], want)
		}
	}
}

// TestBulkRefused: an increment without -marker, a selection the server
// cannot parse and a cluster it does not have each exit 2, saying why
// (-marker, the server's message, the cluster), and apply nothing.
func TestBulkRefused(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := visittest.New(t, 100, 8, func(*http.Request, int) int { requests.Add(1); return 0 })
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"update", "-cluster", "music", "-namespace", "music", "-type", "music", "-selection", "true", "-update", `{"fields":{"n":{"increment":1}}}`}, "give -marker FIELD"},
		{[]string{"delete", "-cluster", "music", "-selection", "music.n ~ 3", "-checkpoint", filepath.Join(t.TempDir(), "ck.json")}, `Could not parse document selection "music.n ~ 3"`},
		{[]string{"delete", "-cluster", "nope", "-selection", "true"}, "no content cluster 'nope'"},
		{[]string{"update", "-cluster", "music", "-selection", "true", "-update", `{"fields":{}}`}, "-namespace, -type and -update are required"},
	} {
		code, _, stderr := runCmd(t, append(append(tc.args[:1:1], "-q", "-url", srv.URL), tc.args[1:]...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(t.TempDir()), "*", "ck.json")); len(matches) != 0 {
		t.Errorf("a refused run left its checkpoint: %v", matches)
	}
	if srv.Deleted() != 0 || len(srv.Updates()) != 0 || requests.Load() > 32 {
		t.Errorf("%d deleted, %d updated, %d requests: want nothing applied, and a request a slice at most (two runs reach the server, 16 slices each)", srv.Deleted(), len(srv.Updates()), requests.Load())
	}
}

// TestUpdateKilled: an increment with -marker and -checkpoint, SIGKILLed
// twice once its checkpoint covers part of the run and its requests are
// held at the server (applied after the kill, unknown to the process),
// then the same command to its end, applies the increment to every
// matching document exactly once, and processes at most 1.3 times the
// buckets (a resume goes on from its checkpoint).
func TestUpdateKilled(t *testing.T) {
	t.Parallel()
	type holding struct{ arrived, release chan struct{} }
	var hold atomic.Pointer[holding]
	srv := visittest.NewUnstartedServer(20000, 512, func(_ *http.Request, n int) int {
		if h := hold.Load(); h != nil {
			h.arrived <- struct{}{}
			<-h.release // the process is killed meanwhile
		}
		return visittest.ChunkFaults(nil, n)
	})
	srv.ChunkBuckets = 2
	srv.Start()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.json")
	args := []string{"update", "-q", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music", "-selection", "true",
		"-update", `{"fields":{"n":{"increment":1}}}`, "-marker", "run", "-slices", "4", "-checkpoint", ck}
	written := renames(t, dir)
	for range 2 {
		stderr := newSyncBuffer()
		cmd := startProcess(t, stderr, args...)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		for range 20 { // twenty checkpoints: part of the run
			nextRename(t, written, exited, "ck.json", stderr)
		}
		h := &holding{arrived: make(chan struct{}, 1<<10), release: make(chan struct{})}
		hold.Store(h)
		select {
		case <-h.arrived:
		case <-exited:
			t.Fatalf("the update ended before it was killed; stderr:\n%s", stderr)
		}
		_ = cmd.Process.Kill()
		<-exited
		hold.Store(nil)
		close(h.release)
		for len(written) > 0 { // this run's last checkpoints are not the next one's
			<-written
		}
	}
	var stdout, stderr bytes.Buffer
	if err := runBulk(context.Background(), args[1:], true, &stdout, &stderr); err != nil {
		t.Fatalf("the resumed run: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "resuming from ") {
		t.Errorf("the last run did not resume:\n%s", stderr.String())
	}
	updates := srv.Updates()
	for d := range 20000 {
		if updates[d] != 1 {
			t.Fatalf("document %d updated %d times, want once", d, updates[d])
		}
	}
	if b := srv.ProcessedBuckets(); b > 512*13/10 {
		t.Errorf("%d buckets processed for 512: a resume started over", b)
	} else {
		t.Logf("%d buckets processed for 512, over two kills", b)
	}
}

// TestBulkProgressFlag: -progress alone (as scripts call it), a duration,
// false and 0 are each taken; a word is a usage error.
func TestBulkProgressFlag(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]time.Duration{"-progress": time.Second, "-progress=3s": 3 * time.Second, "-progress=false": 0, "-progress=0": 0} {
		fs := newFlagSet("delete")
		var f bulkFlags
		addBulkFlags(fs, &f, false)
		if err := fs.Parse([]string{arg, "-q"}); err != nil || f.progress != want {
			t.Errorf("%s: %v, %v; want %v", arg, err, f.progress, want)
		}
	}
	code, _, stderr := runCmd(t, "delete", "-url", "http://localhost:1", "-cluster", "music", "-selection", "true", "-progress=often")
	if code != exitUsage || !strings.Contains(stderr, "want a duration") {
		t.Errorf("-progress=often: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestDeleteVerifyOfItsType: -verify after a delete of one namespace and
// type counts what is left of that type alone: the server's documents of
// another type that match the selection are not the run's (it used to
// visit every type, and exit 1 after a complete delete).
func TestDeleteVerifyOfItsType(t *testing.T) {
	t.Parallel()
	srv := visittest.NewUnstartedServer(1000, 16, nil)
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/document/v1/":
			// Every type: one of another type besides the corpus (all of
			// music), which a delete of music does not touch.
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"pathId":"/document/v1/","documents":[{"id":"id:other:other::1","fields":{}}],"documentCount":1}`))
		default:
			inner.ServeHTTP(w, r)
		}
	})
	srv.Start()
	t.Cleanup(srv.Close)
	code, _, stderr := runCmd(t, "delete", "-q", "-verify", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music",
		"-selection", "true", "-slices", "2")
	if code != 0 || !strings.Contains(stderr, "-verify: no document matches") || srv.Deleted() != 1000 {
		t.Errorf("exit %d, %d deleted; stderr:\n%s\nwant 0, every document of music deleted and none left", code, srv.Deleted(), stderr)
	}
}

// TestBulkSummaryCounts: the summary's requests, throttled, cut and
// failed are what the server saw, every attempt counted, the retry
// layers' included: it said "failed":0,"cut":0 while the server had
// answered 500s and cut connections, which the layers had retried.
func TestBulkSummaryCounts(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 4000, 64, visittest.ChunkFaults)
	code, stdout, stderr := runCmd(t, "delete", "-q", "-url", srv.URL, "-cluster", "music", "-selection", "true", "-slices", "4")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var sum struct{ Documents, Requests, Throttled, Cut, Failed int }
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("the summary %q: %v", stdout, err)
	}
	n := srv.Requests()
	var throttled, cut, failed int
	for i := range n { // as visittest.ChunkFaults answers request i
		switch i % 23 {
		case 3, 14, 7, 17:
			failed++
		case 10:
			cut++
		case 20:
			throttled++
		}
	}
	if sum.Requests != n || sum.Throttled != throttled || sum.Cut != cut || sum.Failed != failed {
		t.Errorf("the summary %+v; the server saw %d requests: %d throttled, %d cut, %d failed", sum, n, throttled, cut, failed)
	}
	if sum.Documents > 4000 || srv.Deleted() != 4000 {
		t.Errorf("%d documents said deleted, %d deleted", sum.Documents, srv.Deleted())
	}
}
