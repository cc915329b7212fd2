package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowShare answers every query ok, holding one in every ten each of the
// first slow (of ten) for hold; with busy, it answers the others 503 at
// once instead.
func slowShare(slow int, hold time.Duration, busy bool) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1) % 10
		switch {
		case k < int64(slow):
			time.Sleep(hold)
		case busy:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, benchOK)
	})
}

// TestBenchOKLatencyAndTimeline: when most answers are fast 503s, the
// latency of the ok answers alone (latency_ok_ms) is the service time,
// which the latency of all answers hides; the timeline has an entry a
// second, whose sent add up to the queries.
func TestBenchOKLatencyAndTimeline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(slowShare(1, 200*time.Millisecond, true))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	code, stdout, stderr := runCmd(t, "bench", "-q", "-hedge", "off", "-url", srv.URL, "-rate", "200", "-duration", "2s", "-json", out,
		writeFile(t, "/search/?yql=select+*+from+music+where+true\n"))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	all, _ := r["latency_ms"].(map[string]any)
	ok, _ := r["latency_ok_ms"].(map[string]any)
	if okP50, _ := ok["p50"].(float64); okP50 < 200 || all["p50"].(float64) >= 200 {
		t.Errorf("latency_ok_ms %v, latency_ms %v: want the ok answers' p50 at least the 200 ms service time, all answers' below", ok, all)
	}
	tl, _ := r["timeline"].([]any)
	var sent float64
	for i, e := range tl {
		s, _ := e.(map[string]any)
		if s["t"] != float64(i) {
			t.Errorf("timeline entry %d: t = %v", i, s["t"])
		}
		sent += s["sent"].(float64)
		if s["sent"] != s["ok"].(float64)+s["degraded"].(float64)+s["failed"].(float64) {
			t.Errorf("timeline entry %d: %v: sent is not ok + degraded + failed", i, s)
		}
	}
	if len(tl) != 2 || sent != r["queries"] {
		t.Errorf("timeline of %d entries, %v sent; want 2 entries (2 s) and the %v queries", len(tl), sent, r["queries"])
	}
	if !strings.Contains(stdout, "ok answers' response time:") {
		t.Errorf("the text report has no line of the ok answers' latency:\n%s", stdout)
	}
}

// TestBenchAssert: a container holding 30 % of its queries 100 ms breaches
// p99<=20ms (exit 1, naming it) and keeps p99<=5s (exit 0); a bad
// expression is a usage error (exit 2) before anything is sent.
func TestBenchAssert(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(slowShare(3, 100*time.Millisecond, false))
	t.Cleanup(srv.Close)
	queries := writeFile(t, "/search/?yql=select+*+from+music+where+true\n")
	bench := func(assert string) (int, string) {
		code, _, stderr := runCmd(t, "bench", "-q", "-hedge", "off", "-url", srv.URL, "-rate", "100", "-duration", "1s", "-assert", assert, queries)
		return code, stderr
	}
	if code, stderr := bench("p99<=20ms, failed<1%"); code != exitFail || !strings.Contains(stderr, "-assert p99<=20ms breached: p99 is 1") ||
		strings.Contains(stderr, "failed<1%") {
		t.Errorf("p99<=20ms: exit %d, stderr:\n%s\nwant 1, naming the p99 and not failed", code, stderr)
	}
	if code, stderr := bench("p99<=5s,failed<=0.01,rate>=50"); code != 0 {
		t.Errorf("p99<=5s: exit %d, stderr:\n%s", code, stderr)
	}
	for _, bad := range []string{"p99", "p98<1s", "p99<=20", "failed<120%", "rate>=fast"} {
		if code, stderr := bench(bad); code != exitUsage || !strings.Contains(stderr, "-assert") {
			t.Errorf("-assert %q: exit %d, stderr:\n%s\nwant 2", bad, code, stderr)
		}
	}
}

// TestBenchPoisson: with Poisson arrivals at 300/s for 2 s, about 600
// queries are sent (the count varies: ±5 standard deviations here), each
// answered, and the report says so.
func TestBenchPoisson(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(slowShare(0, 0, false))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "report.json")
	code, _, stderr := runCmd(t, "bench", "-q", "-arrivals", "poisson", "-url", srv.URL, "-rate", "300", "-duration", "2s", "-json", out,
		writeFile(t, "/search/?yql=select+*+from+music+where+true\n"))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	r := readJSON(t, out)
	if q, _ := r["queries"].(float64); q < 600-5*24.5 || q > 600+5*24.5 || r["ok"] != q || r["arrivals"] != "poisson" {
		t.Errorf("the report %v: want about 600 queries, every one ok, arrivals poisson", r)
	}
	if code, _, stderr := runCmd(t, "bench", "-arrivals", "bursty", "-url", srv.URL, "-rate", "300", "-"); code != exitUsage || !strings.Contains(stderr, "-arrivals") {
		t.Errorf("-arrivals bursty: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestBenchPlot: -plot draws a run as an SVG that an XML reader takes,
// with the latency percentiles and the answers as series; a step run as
// the latency–throughput curve with the knee marked; a FILE that cannot
// be written is refused before the run (exit 2).
func TestBenchPlot(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(slowShare(1, 5*time.Millisecond, false))
	t.Cleanup(srv.Close)
	queries := writeFile(t, "/search/?yql=select+*+from+music+where+true\n")
	dir := t.TempDir()
	for _, tc := range []struct {
		rate string
		want []string
	}{
		{"100", []string{`id="series-p50"`, `id="series-p99"`, `id="series-p999"`, `id="series-ok"`, `id="series-degraded+failed"`}},
		{"50:150:50", []string{`id="series-p99"`, `id="knee"`, `id="slo"`, "latency against throughput"}},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(tc.rate, ":", "-")+".svg")
		code, _, stderr := runCmd(t, "bench", "-q", "-url", srv.URL, "-rate", tc.rate, "-duration", "1s", "-slo", "1s", "-plot", out, queries)
		if code != 0 {
			t.Fatalf("-rate %s: exit %d; stderr:\n%s", tc.rate, code, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(data, new(struct{ XMLName xml.Name })); err != nil {
			t.Errorf("-rate %s: the SVG is not XML: %v", tc.rate, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(data), w) {
				t.Errorf("-rate %s: the SVG has no %s", tc.rate, w)
			}
		}
	}
	code, _, stderr := runCmd(t, "bench", "-url", srv.URL, "-rate", "100", "-plot", filepath.Join(dir, "no", "such", "dir.svg"), queries)
	if code != exitUsage || !strings.Contains(stderr, "-plot") {
		t.Errorf("an unwritable -plot: exit %d, stderr:\n%s", code, stderr)
	}
}
