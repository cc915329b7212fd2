package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed"
)

// noWaits returns the demo's policies without their waits, so that tests
// run at loopback speed.
func noWaits() (outer, inner retries.Policy) {
	none := retries.WithWait(retries.WaitNone())
	return retries.DocV1.Copy(none), retries.Throttle.Copy(none)
}

// planned returns a fault plan that gives document i, on its n-th admitted
// request, the fault plan[i%len(plan)][n] (none once the list runs out).
func planned(plan [][]fault) faultFunc {
	return func(id string, n int) fault {
		i, err := strconv.Atoi(id)
		if err != nil {
			panic(err)
		}
		if p := plan[i%len(plan)]; n < len(p) {
			return p[n]
		}
		return faultNone
	}
}

func TestFeedDemoAbsorbsEveryFault(t *testing.T) {
	t.Parallel()
	const (
		ok  = faultNone
		x   = faultThrottle
		u   = faultUnavailable
		rst = faultReset
	)
	// Per document class: the faults of its admitted requests in order. Each
	// class fails at most twice at the outer layer (a 503 or a reset), so
	// DocV1's three attempts absorb everything.
	plan := [][]fault{
		{},
		{x, x},            // Throttle absorbs two 429s
		{u},               // DocV1 absorbs a 503
		{rst},             // DocV1 absorbs a reset
		{u, x, rst},       // 503, then 429 and a reset in the second outer attempt
		{x, x, x, u, x},   // three 429s, a 503, a 429
		{rst, u, x, x, x}, // a reset, a 503, three 429s on the last attempt
	}
	// Per class: requests, 429s, 503s, resets.
	per := [][4]int{{1, 0, 0, 0}, {3, 2, 0, 0}, {2, 0, 1, 0}, {2, 0, 0, 1}, {4, 1, 1, 1}, {6, 4, 1, 0}, {6, 3, 1, 1}}
	const docs = 42 // six rounds of the plan
	var want [4]int64
	for _, p := range per {
		for j := range want {
			want[j] += int64(p[j] * docs / len(plan))
		}
	}

	outer, inner := noWaits()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var progress bytes.Buffer
	res, err := feedDemo(ctx, demoConfig{
		// A fixed concurrency: the plan's 429s are not a server's load,
		// and a limiter would rightly slow down for them.
		docs: docs, rate: 1e6, burst: 1e6, concurrency: 5, fixed: true,
		faults: planned(plan), outer: outer, inner: inner,
		progress: time.Hour,
	}, &progress)
	if err != nil {
		t.Fatalf("feedDemo() error = %v", err)
	}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"acknowledged (server)", int64(res.acked), docs},
		{"lost", int64(len(res.lost)), 0},
		{"given up (client)", int64(len(res.givenUp)), 0},
		{"done (client)", res.done, docs},
		{"duplicates", res.duplicates, 0},
		{"requests (client)", res.requests, want[0]},
		{"requests (server)", res.serverReqs, want[0]},
		{"retries", res.retries, want[0] - docs},
		{"429s (client)", res.got429, want[1]},
		{"429s (server)", res.throttled, want[1]},
		{"503s (client)", res.got503, want[2]},
		{"503s (server)", res.unavailable, want[2]},
		{"resets (server)", res.resets, want[3]},
		{"failed requests (client)", res.connErrors, want[3]},
		{"rejected bodies", res.rejected, 0},
	} {
		if c.got != c.want {
			t.Errorf("feedDemo() %s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if res.lastErr != nil {
		t.Errorf("feedDemo() last error = %v, want none", res.lastErr)
	}
}

// TestFeedDemoReportsLoss checks that "lost" is not 0 by construction: a
// document the server never accepts is reported lost, by the server's count
// as well as the client's.
func TestFeedDemoReportsLoss(t *testing.T) {
	t.Parallel()
	outer, inner := noWaits()
	faults := func(id string, n int) fault {
		switch id {
		case "7":
			return faultUnavailable // every time: DocV1 gives up
		case "9":
			return faultReset // every time: DocV1 gives up
		}
		return faultNone
	}
	res, err := feedDemo(context.Background(), demoConfig{
		docs: 12, rate: 1e6, concurrency: 3, faults: faults, outer: outer, inner: inner,
	}, nil)
	if err != nil {
		t.Fatalf("feedDemo() error = %v", err)
	}
	slices.Sort(res.lost)
	if want := []string{"7", "9"}; !slices.Equal(res.lost, want) {
		t.Errorf("feedDemo() lost = %q, want %q", res.lost, want)
	}
	if res.acked != 10 {
		t.Errorf("feedDemo() acknowledged = %d, want 10", res.acked)
	}
	// DocV1 makes three attempts for each of the two documents, and the
	// feed one more round of them when the server acknowledged another
	// document after the failure (see feed's outlast).
	for _, n := range []int64{res.got503, res.resets} {
		if n != 3 && n != 6 {
			t.Errorf("feedDemo() 503s, resets = %d, %d, want 3 or 6 each: one or two rounds of DocV1's 3 attempts", res.got503, res.resets)
		}
	}
	var out bytes.Buffer
	writeDemoSummary(&out, demoConfig{rate: 1e6}, res)
	if !strings.Contains(out.String(), "lost                 2 (2 given up by the client") {
		t.Errorf("summary does not report the loss:\n%s", &out)
	}
}

// TestFeedDemoThrottles runs the real token bucket: more workers than it
// admits at once, so some requests get 429 and Throttle retries them.
func TestFeedDemoThrottles(t *testing.T) {
	t.Parallel()
	outer, inner := noWaits()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const docs = 40
	res, err := feedDemo(ctx, demoConfig{
		docs: docs, rate: 400, burst: 1, concurrency: 8,
		faults: randomFaults(0, 0), outer: outer, inner: inner,
	}, nil)
	if err != nil {
		t.Fatalf("feedDemo() error = %v", err)
	}
	if res.acked != docs || len(res.lost) != 0 || res.duplicates != 0 {
		t.Errorf("feedDemo() acknowledged, lost, duplicates = %d, %d, %d, want %d, 0, 0", res.acked, len(res.lost), res.duplicates, docs)
	}
	if res.got429 == 0 || res.got429 != res.throttled || res.requests != docs+res.got429 {
		t.Errorf("feedDemo() 429s client %d, server %d, requests %d; want some 429s, each retried once", res.got429, res.throttled, res.requests)
	}
}

// TestDemoCommand runs the command with the real policies. With no faults
// and a rate well above what the workers can send, nothing is retried, so
// it does not sleep.
func TestDemoCommand(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, "demo", "-docs", "40", "-rate", "1000000", "-concurrency", "4", "-fault-rate", "0", "-reset-rate", "-0")
	if code != exitOK || stderr != "" {
		t.Fatalf("run(demo) = %d, stderr %q\n%s", code, stderr, out)
	}
	for _, want := range []string{
		"Feeding 40 documents through the engine of retries feed (DocV1 around Throttle,\nthe limiter at most 4 in flight)",
		"limiter              Limiter(limit=",
		"answers 503 to 0% and resets the connection of 0% of the admitted requests.", // -0 prints as 0
		"acknowledged         40 of 40 documents (the server's own count)",
		"lost                 0\n",
		"duplicates           0 ",
		"requests sent        40 for 40 documents (0 retries)",
		"429s absorbed        0",
		"goodput ",
		"The same documents, each time to a new server of the same kind, 4 requests in flight:",
		"net/http, each document sent once  40 of 40 acknowledged, 0 lost, 40 requests (0×429, 0×503)",
		"DocV1 around Throttle, no limiter  40 of 40 acknowledged, 0 lost, 40 requests",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run(demo) output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoServerCountsDuplicates(t *testing.T) {
	t.Parallel()
	srv := newDemoServer(1e6, 1e6, randomFaults(0, 0))
	ts := httptest.NewServer(srv.handler())
	defer ts.Close()
	post := func(id, body string) int {
		t.Helper()
		resp, err := http.Post(ts.URL+demoPath+id, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		id, body string
		want     int
	}{
		{"1", string(docBody("1")), http.StatusOK},
		{"2", string(docBody("2")), http.StatusOK},
		{"1", string(docBody("1")), http.StatusOK}, // a duplicate
		{"3", "", http.StatusBadRequest},           // no body: not processed
		{"3", string(docBody("4")), http.StatusBadRequest},
	} {
		if got := post(tc.id, tc.body); got != tc.want {
			t.Errorf("POST %s = %d, want %d", tc.id, got, tc.want)
		}
	}
	if got := srv.duplicates.Load(); got != 1 {
		t.Errorf("duplicates = %d, want 1", got)
	}
	if got, want := srv.ackedIDs(), map[string]int{"1": 2, "2": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("acknowledged = %v, want %v", got, want)
	}
	if got := srv.rejected.Load(); got != 2 {
		t.Errorf("rejected = %d, want 2", got)
	}
}

// TestDemoServerResetIsAConnectionError checks that a reset reaches the
// client as an error that IsConnectionError recognises, before the server
// has processed anything.
func TestDemoServerResetIsAConnectionError(t *testing.T) {
	t.Parallel()
	srv := newDemoServer(1e6, 1e6, randomFaults(0, 1))
	ts := httptest.NewServer(srv.handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+demoPath+"1", "application/json", bytes.NewReader(docBody("1")))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("POST = %s, want a connection error", resp.Status)
	}
	if !retries.IsConnectionError(err) {
		t.Errorf("IsConnectionError(%v) = false, want true", err)
	}
	if n := len(srv.ackedIDs()); n != 0 || srv.resets.Load() != 1 {
		t.Errorf("after a reset: %d acknowledged, %d resets; want 0, 1", n, srv.resets.Load())
	}
}

func TestTokenBucket(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	b := newTokenBucket(10, 2, t0) // 10/s, 2 at once
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {0, true}, {0, false}, // the burst
		{50 * time.Millisecond, false},                                  // half a token
		{100 * time.Millisecond, true}, {100 * time.Millisecond, false}, // one token per 100 ms
		{10 * time.Second, true}, {10 * time.Second, true}, {10 * time.Second, false}, // capped at the burst
		{5 * time.Second, false}, // time going backwards adds nothing
	} {
		if got := b.allow(t0.Add(tc.at)); got != tc.want {
			t.Errorf("allow(t0+%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// docBody is the body the feed sends for document id.
func docBody(id string) []byte { return []byte(`{"fields":` + string(docFields(id)) + "}") }

// TestDemoLine checks the demo's progress line; package feed tests when
// and how lines are written.
func TestDemoLine(t *testing.T) {
	t.Parallel()
	line := demoLine(10)
	for _, tc := range []struct {
		p    feed.Progress
		want string
	}{
		{feed.Progress{Elapsed: time.Second, Rate: 4, Acknowledged: 4},
			"  1.0 s   4/10 docs     4 docs/s  retries 0: 0×429 0×503 0 errors"},
		{feed.Progress{Elapsed: 2500 * time.Millisecond, Rate: 3.2, Acknowledged: 10, Retries: 3, Throttled: 2, Unavailable: 1, Exceptions: 5},
			"  2.5 s  10/10 docs     3 docs/s  retries 3: 2×429 1×503 5 errors"},
	} {
		if got := line(tc.p); got != tc.want {
			t.Errorf("demoLine(10)(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name string
		w    io.Writer
	}{{"buffer", &bytes.Buffer{}}, {"regular_file", f}} {
		if isTerminal(tc.w) {
			t.Errorf("isTerminal(%s) = true, want false", tc.name)
		}
	}
}

func TestOfAdmitted(t *testing.T) {
	t.Parallel()
	// 568 documents in 1.76 s at 500/s after a burst of 125: 1005 admitted.
	want := "57% of the 1005 requests the server admits in that time (500/s after a burst of 125)"
	if got := ofAdmitted(568, 1760*time.Millisecond, 500, 125); got != want {
		t.Errorf("ofAdmitted() = %q, want %q", got, want)
	}
	// Everything the server admitted, burst included, is 100 %, not more.
	if got := ofAdmitted(1125, 2*time.Second, 500, 125); !strings.HasPrefix(got, "100% of the 1125 requests") {
		t.Errorf("ofAdmitted() = %q, want 100%% of 1125", got)
	}
}

func TestPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0%"},
		{math.Copysign(0, -1), "0%"},
		{defaultFaultRate, "0.2%"},
		{defaultResetRate, "0.15%"},
		{1, "100%"},
		{1.0 / 3, "33.3%"},
		{0.999999, "100%"},
		{0.0001234, "0.0123%"},
		{1e-9, "1e-07%"},
		{math.SmallestNonzeroFloat64, "4.94e-322%"},
	} {
		if got := percent(tc.f); got != tc.want {
			t.Errorf("percent(%g) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestPlainDemoLoses: a plain client that sends each document once, 8 at
// a time, to a server that admits a burst of 10 and then 50 a second,
// loses what the server refused: it sends each of 200 once, and fewer
// than 200 are acknowledged.
func TestPlainDemoLoses(t *testing.T) {
	t.Parallel()
	r, err := plainDemo(t.Context(), demoConfig{docs: 200, rate: 50, burst: 10, concurrency: 8, faults: randomFaults(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if r.serverReqs != 200 || r.acked >= 200 || r.acked < 10 || r.throttled != 200-int64(r.acked) {
		t.Errorf("%d requests, %d acknowledged, %d×429; want 200 requests, the burst of 10 or more acknowledged, the rest 429s", r.serverReqs, r.acked, r.throttled)
	}
}
