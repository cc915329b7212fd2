package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/visit/visittest"
)

// TestVisitShares: a visit split in three processes, -share I/3, each with
// its own output and checkpoint, as an Indexed Job runs them. Share 1 is
// SIGKILLed after its first checkpoint and run again; a second process of
// share 0, started while the first holds the share, is refused (exit 2)
// and writes nothing. Every process that runs to its end exits 0, and the
// outputs together hold every document once.
func TestVisitShares(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var held atomic.Bool
	srv := visittest.New(t, 30000, 1024, func(_ *http.Request, n int) int {
		if n >= 12 && !held.Load() {
			<-hold // the kill and the twin happen meanwhile
		}
		if n%5 == 3 {
			return visittest.CutAfter(5 + n%40) // streams cut short
		}
		return 0
	})
	dir := t.TempDir()
	args := func(i int) []string {
		return []string{"visit", "-q", "-url", srv.URL, "-cluster", "music", "-share", fmt.Sprintf("%d/3", i),
			"-o", filepath.Join(dir, fmt.Sprintf("out%d.jsonl", i)), "-checkpoint", filepath.Join(dir, fmt.Sprintf("ck%d.json", i))}
	}
	written := renames(t, dir)
	cmds := make([]*exec.Cmd, 3)
	logs := make([]*syncBuffer, 3)
	exited := make([]chan struct{}, 3)
	for i := range 3 {
		logs[i] = newSyncBuffer()
		cmds[i] = startProcess(t, logs[i], args(i)...)
		exited[i] = make(chan struct{})
		go func() { _ = cmds[i].Wait(); close(exited[i]) }()
	}
	seen := map[string]bool{}
	for len(seen) < 3 { // each share's checkpoint is on disk: each holds its share
		select {
		case n := <-written:
			seen[n] = true
		case <-exited[0]:
			t.Fatalf("share 0 ended early:\n%s", logs[0])
		}
	}
	_ = cmds[1].Process.Kill()
	<-exited[1]
	code, _, stderr := runCmd(t, args(0)...)
	if code != exitUsage || !strings.Contains(stderr, "in use by another run") {
		t.Errorf("a second process of share 0: exit %d, stderr:\n%s\nwant 2, the share held", code, stderr)
	}
	held.Store(true)
	close(hold)
	for _, i := range []int{0, 2} {
		<-exited[i]
		if c := cmds[i].ProcessState.ExitCode(); c != 0 {
			t.Errorf("share %d: exit %d:\n%s", i, c, logs[i])
		}
	}
	if code, _, stderr := runCmd(t, args(1)...); code != 0 {
		t.Fatalf("share 1 run again: exit %d:\n%s", code, stderr)
	}
	all := map[string]int{}
	for i := range 3 {
		docs := outputDocs(t, filepath.Join(dir, fmt.Sprintf("out%d.jsonl", i)))
		if len(docs) == 0 {
			t.Errorf("share %d wrote nothing", i)
		}
		for id, k := range docs {
			all[id] += k
		}
	}
	checkEachOnce(t, all, 30000)
}

// TestShareRefused: a -share that cannot split the run is refused at once
// with exit 2, and so is a share's checkpoint given to another share.
func TestShareRefused(t *testing.T) {
	t.Parallel()
	base := map[string][]string{
		"visit":  {"-url", "http://127.0.0.1:1", "-cluster", "music"},
		"copy":   {"-from", "http://127.0.0.1:1", "-to", "http://127.0.0.1:1", "-cluster", "music"},
		"delete": {"-url", "http://127.0.0.1:1", "-cluster", "music", "-selection", "true"},
		"update": {"-url", "http://127.0.0.1:1", "-cluster", "music", "-selection", "true", "-namespace", "music", "-type", "music",
			"-update", `{"fields":{"a":{"assign":1}}}`},
	}
	for cmd, rest := range base {
		for _, share := range []string{"3/3", "1/0", "x", "-1/2", "2/3 -slices 2"} {
			args := append([]string{cmd, "-share"}, strings.Fields(share)...)
			code, _, stderr := runCmd(t, append(args, rest...)...)
			if code != exitUsage || !strings.Contains(stderr, "-share") {
				t.Errorf("%s -share %s: exit %d, stderr:\n%s\nwant 2, naming -share", cmd, share, code, stderr)
			}
		}
	}
	srv := visittest.New(t, 100, 16, nil)
	dir := t.TempDir()
	ck, out := filepath.Join(dir, "ck.json"), filepath.Join(dir, "out.jsonl")
	if code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-share", "0/3", "-o", out, "-checkpoint", ck); code != 0 {
		t.Fatalf("share 0/3: exit %d:\n%s", code, stderr)
	}
	code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-share", "1/3", "-o", out, "-checkpoint", ck)
	if code != exitUsage || !strings.Contains(stderr, "is the checkpoint of share 0/3, not of share 1/3") {
		t.Errorf("share 1/3 with share 0/3's checkpoint: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestCopyAndUpdateShares: a copy and an increment with -marker, each
// split in three shares run at once (with the faults of their commands'
// own tests), copy every document once and increment every matching one
// exactly once: each share's run id marks its own documents, which no
// other share visits.
func TestCopyAndUpdateShares(t *testing.T) {
	t.Parallel()
	t.Run("copy", func(t *testing.T) {
		t.Parallel()
		src := visittest.New(t, 3000, 256, func(_ *http.Request, n int) int {
			if n%10 == 3 {
				return visittest.CutAfter(3 + 97*n%500)
			}
			return 0
		})
		dst := feedtest.New(t, func(_ *http.Request, n int) int {
			if n%20 == 5 {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		dir := t.TempDir()
		runShares(t, func(i int) []string {
			return []string{"copy", "-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-share", fmt.Sprintf("%d/3", i),
				"-checkpoint", filepath.Join(dir, fmt.Sprintf("ck%d.json", i))}
		})
		count, _ := appliedPuts(t, dst)
		checkCopied(t, count, 3000)
	})
	t.Run("update", func(t *testing.T) {
		t.Parallel()
		srv := visittest.New(t, 3000, 64, visittest.ChunkFaults)
		dir := t.TempDir()
		runShares(t, func(i int) []string {
			return []string{"update", "-q", "-verify", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music",
				"-selection", "music.n < 2000", "-update", `{"fields":{"n":{"increment":1}}}`, "-marker", "run",
				"-share", fmt.Sprintf("%d/3", i), "-checkpoint", filepath.Join(dir, fmt.Sprintf("ck%d.json", i))}
		})
		updates := srv.Updates()
		for d := range 3000 {
			if want := map[bool]int{true: 1}[d < 2000]; updates[d] != want {
				t.Fatalf("document %d updated %d times, want %d", d, updates[d], want)
			}
		}
	})
}

// runShares runs the three shares' commands at once, in this process, and
// wants each to exit 0.
func runShares(t *testing.T, args func(i int) []string) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if code, _, stderr := runCmd(t, args(i)...); code != 0 {
				t.Errorf("share %d/3: exit %d:\n%s", i, code, stderr)
			}
		})
	}
	wg.Wait()
}
