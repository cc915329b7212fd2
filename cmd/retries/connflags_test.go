package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestConnFlags: the headers of -header and -header-file are sent
// together; a -header-file or a -ca that cannot be read is an error that
// names it.
func TestConnFlags(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "Authorization: Bearer t0ken\n")
	fs := newFlagSet("visit")
	var c connFlags
	addConnFlags(fs, &c)
	if err := fs.Parse([]string{"-header", "X-A: 1", "-header-file", file}); err != nil {
		t.Fatal(err)
	}
	h, tlsCfg, err := c.load()
	if err != nil || h.Get("X-A") != "1" || h.Get("Authorization") != "Bearer t0ken" || tlsCfg != nil {
		t.Errorf("load() = %v, %v, %v; want both headers and no TLS configuration", h, tlsCfg, err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		c    connFlags
		want string
	}{
		{connFlags{headerFile: missing}, "-header-file: "},
		{connFlags{ca: missing}, missing},
	} {
		if _, _, err := tc.c.load(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.c, err, tc.want)
		}
	}
}

// TestBenchHeaderFile: bench sends the headers of -header-file with every
// query, and prints none of them.
func TestBenchHeaderFile(t *testing.T) {
	t.Parallel()
	var with, without atomic.Int64
	c := &container{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cr3t" {
			with.Add(1)
		} else {
			without.Add(1)
		}
		c.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	headers := writeFile(t, "Authorization: Bearer s3cr3t\n")
	code, stdout, stderr := runCmd(t, "bench", "-url", srv.URL, "-rate", "50", "-duration", "200ms", "-header-file", headers, "-json", out, queryFile(t))
	report, _ := os.ReadFile(out)
	if code != 0 || with.Load() == 0 || without.Load() != 0 {
		t.Fatalf("exit %d, %d requests with the header and %d without; stderr:\n%s", code, with.Load(), without.Load(), stderr)
	}
	if strings.Contains(stdout+stderr+string(report), "s3cr3t") {
		t.Errorf("the header's value was printed")
	}
}
