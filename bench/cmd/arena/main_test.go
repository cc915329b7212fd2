package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// needNginx skips the test without nginx, unless ARENA_REQUIRE_NGINX is
// set, as .ci/run sets it once it has installed nginx.
func needNginx(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			if os.Getenv("ARENA_REQUIRE_NGINX") != "" {
				t.Fatal("nginx is not installed, and ARENA_REQUIRE_NGINX asks for the arena to run")
			}
			t.Skip("nginx is not installed")
		}
	}
}

// buildRetries builds the retries command and returns its path.
func buildRetries(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retries")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/seed32e55400/retries/cmd/retries").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// field returns the number after " name=" in line.
func field(t *testing.T, line, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(` ` + regexp.QuoteMeta(name) + `=(-?[0-9.]+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %s", name, line)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return n
}

// TestArenaRunsAFeed runs a short feed of the retries command through the
// arena, with faults and an outage of half a second of each kind (503s,
// resets, nginx down): the line's counts add up, agree with the feeder's
// exit, and carry the statuses the limit, the outage and the faults gave.
func TestArenaRunsAFeed(t *testing.T) {
	needNginx(t)
	bin := buildRetries(t)
	for _, kind := range []struct{ name, status string }{{"503", ` 503:[0-9]+`}, {"reset", ` 502:[0-9]+`}, {"down", ``}} {
		c := config{docs: 1000, rate: 500, burst: 20, fault: 0.01, reset: 0.01, outage: "300ms+500ms", outageKind: kind.name,
			label: kind.name, limit: time.Minute, seed: 3}
		line, _, err := run(c, []string{bin, "feed", "-q", "-url", "$ARENA_URL", "$ARENA_DOCS"})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(line)
		// The store's counts add up, and the feeder's exit agrees with
		// them: a feed that lost a document says so. (A put whose answer
		// nginx lost as it stopped is sent again, so down may store one
		// twice.)
		acked, lost, dup, exit := field(t, line, "acked"), field(t, line, "lost"), field(t, line, "dup"), field(t, line, "exit")
		if acked+lost != 1000 || acked < 900 || dup > 20 || (lost > 0) != (exit != 0) {
			t.Errorf("%s: acked %v, lost %v, dup %v, exit %v: want them to add up to 1 000, nearly all stored, exit 0 exactly when none lost", kind.name, acked, lost, dup, exit)
		}
		if kind.name != "down" && dup != 0 {
			t.Errorf("%s: %v documents stored twice", kind.name, dup)
		}
		if kind.name != "down" && field(t, line, "outage-requests") == 0 {
			t.Errorf("%s: no request met the outage: %s", kind.name, line)
		}
		for _, want := range []string{` docs=1000 `, ` \(200:[0-9]+ .*429:[0-9]+`, kind.status} {
			if !regexp.MustCompile(want).MatchString(line) {
				t.Errorf("%s: the line lacks %q: %s", kind.name, want, line)
			}
		}
	}
}

// TestArenaShapesTheServer runs two feeders at once over HTTP/2 against a
// store of 4 slots of 5 ms with a queue of 4, whose service time doubles
// after half a second: each feeder stores its own half, the slots and the
// queue refuse some requests with 429s, and the line has each feeder's
// rate and the fairness over them.
func TestArenaShapesTheServer(t *testing.T) {
	needNginx(t)
	bin := buildRetries(t)
	c := config{docs: 1000, rate: 1000000, burst: 1000000, h2: true, inflight: 4, queue: 4, service: 5 * time.Millisecond,
		phases: "500ms:0.5", feeders: 2, limit: time.Minute, seed: 5}
	line, _, err := run(c, []string{bin, "feed", "-q", "-http2", "-url", "$ARENA_URL", "$ARENA_DOCS"})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(line)
	if field(t, line, "acked") != 1000 || field(t, line, "exit") != 0 || field(t, line, "dup") != 0 {
		t.Errorf("want 1 000 stored once each, exit 0: %s", line)
	}
	for _, want := range []string{` per-feeder-docs/s=[0-9]+,[0-9]+ jain=`, ` \(200:[0-9]+`} {
		if !regexp.MustCompile(want).MatchString(line) {
			t.Errorf("the line lacks %q: %s", want, line)
		}
	}
	// 1 000 documents at 4/5 ms, then 4/10 ms, take at least 1.5 s.
	if e := field(t, line, "elapsed"); e < 1.5 {
		t.Errorf("elapsed %vs: the slots and the phase did not hold the feed back", e)
	}
}

// TestArenaRunsAVisitAndACopy runs retries visit, with cut streams and
// 503s, and retries copy through the arena: each document of the corpus
// exported, or stored with its fields, once.
func TestArenaRunsAVisitAndACopy(t *testing.T) {
	needNginx(t)
	bin := buildRetries(t)
	v := config{visit: true, docs: 3000, buckets: 64, rate: 1000000, burst: 1000000, inflight: 4, fault: 0.02, reset: 0.05,
		bucketTime: time.Millisecond, limit: time.Minute, seed: 7}
	line, _, err := run(v, []string{bin, "visit", "-q", "-url", "$ARENA_URL", "-cluster", "music", "-o", "$ARENA_OUT"})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(line)
	if field(t, line, "exported") != 3000 || field(t, line, "dup") != 0 || field(t, line, "bad") != 0 || field(t, line, "exit") != 0 {
		t.Errorf("visit: want 3 000 exported once each, exit 0: %s", line)
	}
	c := config{copy: true, docs: 3000, buckets: 64, rate: 2000, burst: 50, bucketTime: time.Millisecond, limit: time.Minute, seed: 9}
	line, _, err = run(c, []string{bin, "copy", "-q", "-from", "$ARENA_URL", "-to", "$ARENA_URL_TO", "-cluster", "music"})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(line)
	if field(t, line, "acked") != 3000 || field(t, line, "corrupt") != 0 || field(t, line, "exit") != 0 || field(t, line, "visited") < 3000 {
		t.Errorf("copy: want 3 000 stored with their fields, exit 0: %s", line)
	}
}

// TestArenaLimitKillsTheFeedersChildren: a feeder still running at -limit
// is killed with what it started (a shell's children, go run's binary),
// and run reports its exit: the arena used to kill the shell alone and
// leave its child running, and exit 0 however the feeder ended.
func TestArenaLimitKillsTheFeedersChildren(t *testing.T) {
	needNginx(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := config{docs: 10, rate: 500, burst: 20, limit: 500 * time.Millisecond}
	_, exit, err := run(c, []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; wait"})
	if err != nil {
		t.Fatal(err)
	}
	if exit == 0 {
		t.Error("a feeder killed at -limit: exit 0")
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data[:len(data)-1]))
	// The child is a zombie until its parent's parent reaps it, or gone:
	// either way it no longer runs.
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !regexp.MustCompile(`\) [ZX] `).Match(stat) {
		t.Errorf("the feeder's child %d still runs: %s", pid, stat)
	}
}

// TestArenaQuery runs retries bench for a second against the arena's
// query mode (three containers, one holding a tenth of its queries 50 ms
// longer, a tenth of the queries bad): the line counts what the
// containers served, and agrees with the report: every query answered, the
// bad ones once each (a 400 and a soft doomed 500 are never asked again),
// no timeout above the deadline.
func TestArenaQuery(t *testing.T) {
	bin := buildRetries(t)
	out := filepath.Join(t.TempDir(), "report.json")
	c := config{queryMode: true, docs: 300, limit: time.Minute, label: "query", query: queryConfig{containers: 3, tail: "0.1+50ms", tailOn: 1, bad: 0.1}}
	// Without hedges, whose number depends on the machine's timing: a bad
	// query hedged before its answer would be served twice.
	line, exit, err := run(c, []string{"sh", "-c", bin + ` bench $ARENA_URLS -q -hedge off -rate 200 -duration 1s -deadline 500ms -json ` + out + ` $ARENA_QUERIES`})
	if err != nil || exit != 0 {
		t.Fatalf("run: %v, exit %d, %s", err, exit, line)
	}
	t.Log(line)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Queries, OK, Degraded, Failed, Requests float64
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	statuses := regexp.MustCompile(`statuses=\(200:(\d+) 400:(\d+) 500:(\d+)\)`).FindStringSubmatch(line)
	if statuses == nil || statuses[2] != "7" || statuses[3] != "7" {
		t.Errorf("the containers' statuses in %s: want the 7 illegal and 7 soft doomed queries answered once each", line)
	}
	if r.Queries != 200 || r.OK+r.Degraded+r.Failed != 200 || r.Failed != 14 || r.Degraded != 6 {
		t.Errorf("the report %+v: want 200 queries, 14 failed (the bad ones), 6 degraded", r)
	}
	if requests := field(t, line, "requests"); requests != r.Requests || requests != r.Queries {
		t.Errorf("the containers served %v requests, the report says %v for %v queries", requests, r.Requests, r.Queries)
	}
	m := regexp.MustCompile(`max-timeout=([0-9.]+)ms`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no max-timeout= in %s", line)
	}
	if ms, err := strconv.ParseFloat(m[1], 64); err != nil || ms > 495 {
		t.Errorf("the largest timeout sent, in %s: want at most the 500 ms deadline less the margin", line)
	}
}

// TestArenaBulk runs retries update with an increment and -marker through
// the bulk mode's faults (500s and cuts after part of a chunk, 504s, 429s
// beyond two visitors), and the documentation's shell loop on the same
// store: the command exits 0 with every matching document updated once
// and no other touched; the loop exits 0 too, having stopped at its first
// failure with documents left.
func TestArenaBulk(t *testing.T) {
	bin := buildRetries(t)
	c := config{bulkMode: true, docs: 4000, buckets: 64, inflight: 2, limit: time.Minute, label: "bulk", seed: 3,
		bulk: bulkConfig{faults: "0.1,0.05,0.05", selection: "true"}} // an increment of n leaves "true" matching: a request asked again would apply it again
	line, exit, err := run(c, []string{"sh", "-c", bin + ` update -q -url $ARENA_URL -cluster music -namespace music -type music -selection "$ARENA_SELECTION" -update '{"fields":{"n":{"increment":1}}}' -marker run -checkpoint "$(mktemp -d)/ck.json" -slices 4`})
	if err != nil || exit != 0 {
		t.Fatalf("run: %v, exit %d, %s", err, exit, line)
	}
	t.Log(line)
	if field(t, line, "updated-once") != 4000 || field(t, line, "updated-twice") != 0 {
		t.Errorf("%s: want the 4000 documents updated once", line)
	}
	line, exit, err = run(c, []string{"sh", "-c", `c=""; while t=$(curl -s -X DELETE -G --data-urlencode "selection=$ARENA_SELECTION" --data-urlencode cluster=music $c "$ARENA_URL/document/v1/" | jq -re .continuation); do c="--data-urlencode continuation=$t"; done; exit 0`})
	if err != nil || exit != 0 {
		t.Fatalf("the loop: %v, exit %d, %s", err, exit, line)
	}
	t.Log(line)
	if field(t, line, "left") == 0 {
		t.Errorf("%s: the loop left nothing: the faults do not show its early end", line)
	}
}
