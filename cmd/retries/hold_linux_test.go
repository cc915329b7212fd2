package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/visit/visittest"
)

// gate holds the requests of a server while it is shut: each one that
// arrives says so on arrived, and waits until the gate opens or its
// client goes away.
type gate struct {
	shut    atomic.Bool
	arrived chan struct{}
	open    chan struct{}
}

func newGate() *gate {
	g := &gate{arrived: make(chan struct{}, 1<<12), open: make(chan struct{})}
	g.shut.Store(true)
	return g
}

// wait is the server's side: it holds r while the gate is shut.
func (g *gate) wait(r *http.Request) {
	if !g.shut.Load() {
		return
	}
	g.arrived <- struct{}{}
	select {
	case <-g.open:
	case <-r.Context().Done():
	}
}

// release opens the gate for good.
func (g *gate) release() {
	if g.shut.CompareAndSwap(true, false) {
		close(g.open)
	}
}

// TestCheckpointHeldByAnotherProcess: while a process runs feed, visit,
// copy or update on a checkpoint (its requests held at the server), the
// same command on the same checkpoint exits 2 at once, naming the
// holder's process, and sends nothing; once the holder is SIGKILLed, the
// same command takes the checkpoint up and ends.
func TestCheckpointHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"feed", "visit", "copy", "update"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGate()
			t.Cleanup(g.release)
			var sent atomic.Int64
			src := visittest.New(t, 400, 16, func(r *http.Request, _ int) int { sent.Add(1); g.wait(r); return 0 })
			dst := feedtest.New(t, func(r *http.Request, _ int) int { sent.Add(1); g.wait(r); return 0 })
			dir := t.TempDir()
			ck := filepath.Join(dir, "ck.json")
			var args []string
			switch name {
			case "feed":
				var in strings.Builder
				for i := range 100 {
					fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
				}
				args = []string{"feed", "-q", "-url", dst.URL, "-checkpoint", ck, writeFile(t, in.String())}
			case "visit":
				args = []string{"visit", "-q", "-url", src.URL, "-cluster", "music", "-o", filepath.Join(dir, "out.jsonl"), "-checkpoint", ck}
			case "copy":
				args = []string{"copy", "-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-checkpoint", ck}
			case "update":
				args = []string{"update", "-q", "-url", src.URL, "-cluster", "music", "-namespace", "music", "-type", "music", "-selection", "true",
					"-update", `{"fields":{"n":{"increment":1}}}`, "-marker", "run", "-checkpoint", ck}
			}
			stderr := newSyncBuffer()
			holder := startProcess(t, stderr, args...)
			exited := make(chan struct{})
			go func() { _ = holder.Wait(); close(exited) }()
			select {
			case <-g.arrived:
			case <-exited:
				t.Fatalf("the first process ended before its first request was held; stderr:\n%s", stderr)
			}
			before := sent.Load()
			code, _, out := runCmd(t, args...)
			want := fmt.Sprintf("is in use by another run (process %d on ", holder.Process.Pid)
			if code != exitUsage || !strings.Contains(out, want) {
				t.Errorf("the second: exit %d, stderr:\n%s\nwant 2 and %q", code, out, want)
			}
			if n := sent.Load() - before; n > 0 && code == exitUsage {
				// The holder's own requests may still arrive; the
				// second's would come after its exit, which it did not.
				t.Logf("%d requests arrived while the second ran (the holder's)", n)
			}
			_ = holder.Process.Kill()
			<-exited
			g.release()
			code, _, out = runCmd(t, args...)
			if code != 0 {
				t.Errorf("after the holder was killed: exit %d, stderr:\n%s", code, out)
			}
		})
	}
}

// TestUpdateKilledBeforeItsFirstAnswer: an increment with -marker and
// -checkpoint killed as its first request arrives (applied after the
// kill, marked with the run's id) and then run again to its end applies
// the increment to every document once: the run's id was on disk before
// the first request, so the second run is the same run, and skips what
// the first marked.
func TestUpdateKilledBeforeItsFirstAnswer(t *testing.T) {
	t.Parallel()
	g := newGate()
	srv := visittest.NewUnstartedServer(4000, 64, func(r *http.Request, _ int) int { g.wait(r); return 0 })
	srv.Start()
	t.Cleanup(srv.Close)
	ck := filepath.Join(t.TempDir(), "ck.json")
	args := []string{"update", "-q", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music", "-selection", "true",
		"-update", `{"fields":{"n":{"increment":1}}}`, "-marker", "run", "-slices", "4", "-checkpoint", ck}
	stderr := newSyncBuffer()
	cmd := startProcess(t, stderr, args...)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case <-g.arrived:
	case <-exited:
		t.Fatalf("the update ended before it was killed; stderr:\n%s", stderr)
	}
	_ = cmd.Process.Kill()
	<-exited
	g.release() // the requests held are applied now, unknown to anyone
	var stdout, out strings.Builder
	if err := runBulk(context.Background(), args[1:], true, &stdout, &out); err != nil {
		t.Fatalf("the second run: %v; stderr:\n%s", err, out.String())
	}
	srv.Close() // every request applied, the first run's included
	updates := srv.Updates()
	twice := 0
	for d := range 4000 {
		switch n := updates[d]; {
		case n == 0:
			t.Fatalf("document %d not updated", d)
		case n > 1:
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("%d of 4000 documents updated twice", twice)
	}
}
