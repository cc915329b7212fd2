package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/visit/visittest"
)

// outputDocs returns how often each document is in the feed file at path,
// which must be valid feed input of puts.
func outputDocs(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := map[string]int{}
	for op, err := range feed.Read(f) {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if op.Kind != feed.Put || len(op.Fields) == 0 {
			t.Fatalf("%s: %+v is not a put with fields", path, op)
		}
		docs[op.ID]++
	}
	return docs
}

// checkEachOnce fails t unless docs holds each of n documents once.
func checkEachOnce(t *testing.T, docs map[string]int, n int) {
	t.Helper()
	twice := 0
	for _, k := range docs {
		if k > 1 {
			twice++
		}
	}
	if len(docs) != n || twice > 0 {
		t.Errorf("%d documents in the output, %d of them more than once; want each of %d once", len(docs), twice, n)
	}
}

// TestVisitCommand: retries visit writes every document once as feed
// lines that retries feed reads back, and refuses a cluster the server
// does not have with its message (exit 2, no usage).
func TestVisitCommand(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 3000, 64, nil)
	out := filepath.Join(t.TempDir(), "docs.jsonl")
	var stdout, stderr bytes.Buffer
	if err := runVisit(t.Context(), []string{"-q", "-url", srv.URL, "-cluster", "music", "-slices", "4", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("runVisit() = %v; stderr:\n%s", err, stderr.String())
	}
	checkEachOnce(t, outputDocs(t, out), 3000)
	code, _, errOut := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "nope", "-o", out)
	if code != exitUsage || !strings.Contains(errOut, "no content cluster 'nope', only 'music'") || strings.Contains(errOut, "usage:") {
		t.Errorf("an unknown cluster: exit %d, stderr:\n%s\nwant 2 and the server's message alone", code, errOut)
	}
}

// TestVisitCommandResumes: a visit interrupted part way (exit 3), and
// one SIGKILLed once its checkpoint covers part of the output (its streams
// cut short now and then), each go on
// with the same command and -checkpoint: the output then holds every
// document once.
func TestVisitCommandResumes(t *testing.T) {
	t.Parallel()
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		srv := visittest.New(t, 40000, 1024, func(_ *http.Request, n int) int { // pages of about 1000
			if n == 20 {
				cancel()
			}
			return 0
		})
		dir := t.TempDir()
		out, ck := filepath.Join(dir, "docs.jsonl"), filepath.Join(dir, "ck.json")
		args := []string{"-q", "-url", srv.URL, "-cluster", "music", "-slices", "4", "-o", out, "-checkpoint", ck}
		var stdout, stderr bytes.Buffer
		if err := runVisit(ctx, args, &stdout, &stderr); err != silentExit(exitInterrupted) {
			t.Fatalf("the interrupted visit: %v, want exit 3; stderr:\n%s", err, stderr.String())
		}
		if err := runVisit(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("the resumed visit: %v; stderr:\n%s", err, stderr.String())
		}
		checkEachOnce(t, outputDocs(t, out), 40000)
	})
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		hold := make(chan struct{})
		srv := visittest.New(t, 40000, 1024, func(_ *http.Request, n int) int {
			if n >= 20 {
				<-hold // the process is killed meanwhile
			}
			if n%3 == 1 { // streams cut short, after a token's line or a document's
				return visittest.CutAfter(5 + n%40)
			}
			return 0
		})
		dir := t.TempDir()
		out, ck := filepath.Join(dir, "docs.jsonl"), filepath.Join(dir, "ck.json")
		args := []string{"-q", "-url", srv.URL, "-cluster", "music", "-slices", "4", "-o", out, "-checkpoint", ck}
		written := renames(t, dir)
		killed := newSyncBuffer()
		cmd := startProcess(t, killed, append([]string{"visit"}, args...)...)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		nextRename(t, written, exited, "ck.json", killed) // a checkpoint covers part of the output
		_ = cmd.Process.Kill()
		<-exited
		close(hold)
		var stdout, stderr bytes.Buffer
		if err := runVisit(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("the resumed visit: %v; stderr:\n%s", err, stderr.String())
		}
		checkEachOnce(t, outputDocs(t, out), 40000)
	})
}
