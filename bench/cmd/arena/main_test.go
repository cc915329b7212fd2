package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestArenaRunsAFeed builds the retries command and runs a short feed of
// it through the arena, with faults and an outage of half a second of
// each kind (503s, resets, nginx down): the line says every document
// stored (once, but for down), and the statuses the outage and the faults
// gave. Without
// nginx the test skips, unless ARENA_REQUIRE_NGINX is set, as .ci/run
// sets it once it has installed nginx.
func TestArenaRunsAFeed(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			if os.Getenv("ARENA_REQUIRE_NGINX") != "" {
				t.Fatal("nginx is not installed, and ARENA_REQUIRE_NGINX asks for the arena to run")
			}
			t.Skip("nginx is not installed")
		}
	}
	bin := filepath.Join(t.TempDir(), "retries")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/seed32e55400/retries/cmd/retries").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// A put that nginx passed on just before it stopped, whose answer was
	// lost, is sent again: a put is safe to repeat, so down may store a
	// document twice.
	for _, kind := range []struct{ name, stored, status string }{
		{"503", ` acked=1000 lost=0 dup=0 `, ` 503:[0-9]+`},
		{"reset", ` acked=1000 lost=0 dup=0 `, ` 502:[0-9]+`},
		{"down", ` acked=1000 lost=0 dup=[0-9]+ `, ``},
	} {
		c := config{docs: 1000, rate: 500, burst: 20, fault: 0.01, reset: 0.01, outage: "300ms+500ms", outageKind: kind.name,
			label: kind.name, limit: time.Minute, seed: 3}
		line, err := run(c, []string{bin, "feed", "-q", "-url", "$ARENA_URL", "$ARENA_DOCS"})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(line)
		for _, want := range []string{`exit=0 docs=1000 `, kind.stored, ` \(200:1000 .*429:[0-9]+`, kind.status} {
			if !regexp.MustCompile(want).MatchString(line) {
				t.Errorf("%s: the line lacks %q: %s", kind.name, want, line)
			}
		}
	}
}
