package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed32e55400/retries/visit/visittest"
)

// TestVisitOneType: -namespace and -type visit through the type's path,
// /document/v1/NS/TYPE/docid/, every document once; one without the
// other is refused (exit 2), and so is the checkpoint of a visit of all
// types resumed as one of a type.
func TestVisitOneType(t *testing.T) {
	t.Parallel()
	var typed, other atomic.Int64
	srv := visittest.New(t, 2000, 64, func(r *http.Request, _ int) int {
		if r.URL.Path == "/document/v1/music/music/docid/" {
			typed.Add(1)
		} else {
			other.Add(1)
		}
		return 0
	})
	dir := t.TempDir()
	out, ck := filepath.Join(dir, "docs.jsonl"), filepath.Join(dir, "ck.json")
	if code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music", "-o", out); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	checkEachOnce(t, outputDocs(t, out), 2000)
	if typed.Load() == 0 || other.Load() != 0 {
		t.Errorf("%d requests to the type's path, %d to others; want them all to the type's", typed.Load(), other.Load())
	}
	if code, _, stderr := runCmd(t, "visit", "-url", srv.URL, "-cluster", "music", "-namespace", "music"); code != exitUsage || !strings.Contains(stderr, "-namespace and -type go together") {
		t.Errorf("-namespace alone: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-o", out, "-checkpoint", ck); code != 0 {
		t.Fatalf("a visit of all types: exit %d:\n%s", code, stderr)
	}
	code, _, stderr := runCmd(t, "visit", "-q", "-url", srv.URL, "-cluster", "music", "-namespace", "music", "-type", "music", "-o", out, "-checkpoint", ck)
	if code != exitUsage || !strings.Contains(stderr, "was made for another visit") {
		t.Errorf("its checkpoint resumed as a visit of one type: exit %d, stderr:\n%s", code, stderr)
	}
}
