package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A container's answers, as Vespa's search handler writes them.
const (
	benchOK       = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"coverage":{"coverage":100,"documents":10,"full":true,"nodes":1,"results":1,"resultsFull":1},"children":[{"id":"id:music:music::1","relevance":0.9,"fields":{}}]}}`
	benchDegraded = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"coverage":{"coverage":50,"documents":5,"full":false,"nodes":1,"results":1,"resultsFull":0,"degraded":{"match-phase":false,"timeout":true,"adaptive-timeout":false,"non-ideal-state":false}},"children":[]}}`
	benchIllegal  = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":3,"summary":"Illegal query","message":"Could not parse"}]}}`
)

// container answers a query as its "case" parameter (or JSON key) says:
// ok, degraded or illegal, after hold; it counts the requests and records
// the timeouts sent.
type container struct {
	hold     time.Duration
	requests atomic.Int64
	posts    atomic.Int64
}

func (c *container) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	kind := r.URL.Query().Get("case")
	if r.Method == http.MethodPost {
		c.posts.Add(1)
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		kind = fmt.Sprint(m["case"])
	}
	time.Sleep(c.hold) // the container's own time: the point of the test
	switch kind {
	case "degraded":
		fmt.Fprint(w, benchDegraded)
	case "illegal":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, benchIllegal)
	default:
		fmt.Fprint(w, benchOK)
	}
}

// queryFile writes a query file: 8 ok queries (one a JSON body), one
// degraded and one illegal, in turn.
func queryFile(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# a comment, then the queries\n")
	for i := range 7 {
		fmt.Fprintf(&b, "/search/?yql=select+*+from+music+where+true&hits=%d&case=ok\n", i)
	}
	b.WriteString(`{"yql":"select * from music where true","case":"ok"}` + "\n")
	b.WriteString("/search/?yql=select+*+from+music+where+true&case=degraded\n\n")
	b.WriteString("/search/?yql=select&case=illegal\n")
	return writeFile(t, b.String())
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBench: 100 queries offered at 200 a second are each answered once:
// the report counts 80 ok, 10 degraded (a 200 with partial coverage) and
// 10 failed (a 400), with the statuses, a request a query with -hedge off
// (a 400 and a degraded 200 are never asked again), and a row per
// endpoint; the text report has fbench's lines.
func TestBench(t *testing.T) {
	t.Parallel()
	c := &container{}
	a, b := httptest.NewServer(c), httptest.NewServer(c)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	// Without hedges, whose number depends on the machine's timing: the
	// requests are then the queries, exactly (package query tests hedging).
	code, stdout, stderr := runCmd(t, "bench", "-q", "-hedge", "off", "-url", a.URL, "-url", b.URL, "-rate", "200", "-duration", "500ms", "-json", out, queryFile(t))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	status, _ := r["status"].(map[string]any)
	if r["queries"] != 100.0 || r["ok"] != 80.0 || r["degraded"] != 10.0 || r["failed"] != 10.0 || status["200"] != 90.0 || status["400"] != 10.0 {
		t.Errorf("the report %v: want 100 queries, 80 ok, 10 degraded, 10 failed", r)
	}
	if r["requests"] != 100.0 || c.requests.Load() != 100 || c.posts.Load() != 10 {
		t.Errorf("requests %v, the containers saw %d (%d POSTed): want a request a query, as counted", r["requests"], c.requests.Load(), c.posts.Load())
	}
	if eps, _ := r["endpoints"].([]any); len(eps) != 2 {
		t.Errorf("endpoints %v: want a row each", r["endpoints"])
	}
	for _, line := range []string{"offered query rate:", "99.9 percentile:", "actual query rate:", "http request status breakdown:", "degraded:", "cpu per query:"} {
		if !strings.Contains(stdout, line) {
			t.Errorf("the text report has no %q:\n%s", line, stdout)
		}
	}
}

// TestBenchLatencyFromDue: with every answer held 300 ms, the latency is
// counted from each query's due time, so that a tool that waited for
// answers could not hide the wait: p99 at least 300 ms, and a query whose
// answer comes past its deadline is failed, not ok.
func TestBenchLatencyFromDue(t *testing.T) {
	t.Parallel()
	c := &container{hold: 300 * time.Millisecond}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	q := writeFile(t, "/search/?yql=select+*+from+music+where+true&case=ok\n")
	code, _, stderr := runCmd(t, "bench", "-q", "-url", srv.URL, "-rate", "100", "-duration", "300ms", "-deadline", "200ms", "-json", out, q)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	lat, _ := r["latency_ms"].(map[string]any)
	if p99, _ := lat["p99"].(float64); p99 < 200 || r["ok"] != 0.0 || r["failed"] != r["queries"] {
		t.Errorf("held 300 ms, deadline 200 ms: p99 %v ms, %v ok, %v failed of %v; want none ok", lat["p99"], r["ok"], r["failed"], r["queries"])
	}
}

// TestBenchSteps: -rate A:B:STEP runs each rate and names the knee, the
// highest that kept p99 under -slo with failed and degraded under 1 %.
func TestBenchSteps(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&container{})
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	q := writeFile(t, "/search/?yql=select+*+from+music+where+true\n")
	code, stdout, stderr := runCmd(t, "bench", "-q", "-url", srv.URL, "-rate", "50:150:50", "-duration", "200ms", "-slo", "1s", "-json", out, q)
	if code != 0 || !strings.Contains(stdout, "knee: 150 queries/s") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r := readJSON(t, out)
	if steps, _ := r["steps"].([]any); len(steps) != 3 || r["knee_rate"] != 150.0 {
		t.Errorf("the report %v: want 3 steps and the knee at 150", r)
	}
}

// TestBenchBadInput: a bad rate, no file, a line that is no query, an
// unknown -hedge: exit 2, with what is wrong.
func TestBenchBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "0", writeFile(t, "/search/?yql=x\n")}, "-rate \"0\""},
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "10:5:1", writeFile(t, "/search/?yql=x\n")}, "A at most B"},
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "10"}, "want one query FILE"},
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "10", writeFile(t, "select * from x\n")}, "line 1: want a path"},
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "10", "-hedge", "on", writeFile(t, "/search/?yql=x\n")}, "-hedge \"on\""},
		{[]string{"-url", "http://127.0.0.1:1", "-rate", "10", writeFile(t, "# only a comment\n")}, "no query"},
	} {
		code, _, stderr := runCmd(t, append([]string{"bench"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestBenchLine: the line a second says how the queries ended, and the
// statuses other than 200 so far, so that a wrong port is said at once
// (it said only "failed").
func TestBenchLine(t *testing.T) {
	t.Parallel()
	r := &benchReport{OK: 3, Failed: 5, Status: map[string]int64{"200": 3, "connection refused": 4, "503": 1}}
	want := "bench   1.0s: 8 due, 3 ok, 0 degraded, 5 failed (503: 1, connection refused: 4)"
	if got := r.line(time.Second, 8); got != want {
		t.Errorf("line() =\n%s\nwant\n%s", got, want)
	}
}

// TestBenchDeadEndpoints: against two ports where nothing listens, bench
// runs to its end and exits 0, says the connections were refused and then
// that every breaker was open (queries failed at once, without a
// request), and has a row for each endpoint with its breaker's time open.
func TestBenchDeadEndpoints(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	a, b := deadURL(t), deadURL(t)
	code, stdout, stderr := runCmd(t, "bench", "-q", "-url", a, "-url", b, "-rate", "100", "-duration", "500ms", "-json", out, queryFile(t))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	status, _ := r["status"].(map[string]any)
	refused, _ := status["connection refused"].(float64)
	open, _ := status["every breaker open"].(float64)
	// Each breaker opens after 5 refusals, and probes 50 ms after, then
	// at intervals doubling: 4 probes at most in the half second.
	requests, _ := r["requests"].(float64)
	if r["failed"] != 50.0 || refused+open != 50 || open == 0 || requests < refused || requests > 2*(5+4) || r["retries"] != requests-refused {
		t.Errorf("the report %v: want 50 failed, 5 refusals and 4 probes at most an endpoint, the rest failed by the breakers", r)
	}
	eps, _ := r["endpoints"].([]any)
	if len(eps) != 2 {
		t.Fatalf("endpoints %v: want a row each, unanswered as they are", r["endpoints"])
	}
	for _, e := range eps {
		if row, _ := e.(map[string]any); row["breaker_opened"] != 1.0 || row["answers"] != 0.0 {
			t.Errorf("row %v: want no answer, the breaker opened once", row)
		}
	}
	if !strings.Contains(stdout, "every breaker open") || !strings.Contains(stdout, "its breaker open") {
		t.Errorf("the text report does not say the breakers were open:\n%s", stdout)
	}
}

// TestBenchRefusedToken: a container that refuses every query (a 401, a
// token it does not take) is a run like any other, as bench -h says: exit
// 0, every query failed, and the status counted in the report.
func TestBenchRefusedToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no token", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	code, _, stderr := runCmd(t, "bench", "-q", "-url", srv.URL, "-rate", "100", "-duration", "200ms", "-json", out, queryFile(t))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	status, _ := r["status"].(map[string]any)
	if r["failed"] != 20.0 || r["ok"] != 0.0 || status["401"] == nil {
		t.Errorf("the report %v: want 20 failed, none ok, the 401s counted", r)
	}
}

// TestBenchQueriesAsWritten: a query line with a raw ";" in its YQL and a
// "%" that starts no escape is sent as written (url.Query dropped both
// pairs, and bench measured a query without its yql, exit 0); a -json
// FILE that cannot be written is refused before any query is sent
// (it was said after the whole run).
func TestBenchQueriesAsWritten(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"coverage":{"coverage":100,"full":true}}}`))
	}))
	t.Cleanup(srv.Close)
	line := `/search/?yql=select+*+from+music+where+title+contains+"a;b"&filter=50%off&hits=3`
	q := writeFile(t, line+"\n")
	code, _, stderr := runCmd(t, "bench", "-q", "-hedge", "off", "-url", srv.URL, "-rate", "20", "-duration", "100ms", q)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	mu.Lock()
	sent := slices.Clone(got)
	mu.Unlock()
	for _, raw := range sent {
		if !strings.HasPrefix(raw, `yql=select+*+from+music+where+title+contains+"a;b"&filter=50%off&hits=3&timeout=`) {
			t.Fatalf("sent %q, want the line's query string as written, with the timeout after it", raw)
		}
	}
	if len(sent) == 0 {
		t.Fatal("no query sent")
	}
	n := len(sent)
	code, _, stderr = runCmd(t, "bench", "-q", "-url", srv.URL, "-rate", "20", "-duration", "1h", "-json", filepath.Join(t.TempDir(), "missing", "r.json"), q)
	mu.Lock()
	after := len(got)
	mu.Unlock()
	if code != exitUsage || !strings.Contains(stderr, "-json") || after != n {
		t.Errorf("an unwritable -json: exit %d, %d queries sent; stderr:\n%s\nwant 2 at once, none sent", code, after-n, stderr)
	}
}

// TestBenchHelpSaysTheHedgeQuantile: bench -h says the percentile the
// hedge waits for as package query's default is (it said the 95th where
// the client waits for the 97th).
func TestBenchHelpSaysTheHedgeQuantile(t *testing.T) {
	t.Parallel()
	_, stdout, stderr := runCmd(t, "bench", "-h")
	if help := stdout + stderr; !strings.Contains(help, "after the 97th percentile") || strings.Contains(help, "95th") {
		t.Errorf("bench -h:\n%s\nwant the 97th percentile", help)
	}
}
