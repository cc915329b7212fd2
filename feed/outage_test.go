package feed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// puts returns n put operations on ids 0 to n-1, one a line.
func puts(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i, i)
	}
	return b.String()
}

// appliedIDs returns the user part of the ids of the documents srv applied.
func appliedIDs(srv *feedtest.Server) map[string]int {
	ids := map[string]int{}
	for _, a := range srv.Applied() {
		_, rest, _ := strings.Cut(a, " ")
		path, _, _ := strings.Cut(rest, " ")
		path, _, _ = strings.Cut(path, "?")
		ids[path[strings.LastIndexByte(path, '/')+1:]]++
	}
	return ids
}

// outageServer starts a server that goes away for outage once outageAt
// documents are applied: it answers 503 (kind "503"), resets every
// connection ("reset") or stops listening ("down"). inOutage counts the
// requests it answered during the outage (none for "down").
func outageServer(t *testing.T, kind string, outageAt int, outage time.Duration) (srv *feedtest.Server, inOutage *atomic.Int64) {
	t.Helper()
	var (
		mu    sync.Mutex
		begun bool
		until time.Time
	)
	inOutage = new(atomic.Int64)
	srv = feedtest.New(t, func(r *http.Request, n int) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !begun && len(srv.Applied()) >= outageAt:
			begun, until = true, time.Now().Add(outage)
			if kind == "down" {
				go srv.Down() // this request is answered; the next ones are refused
				time.AfterFunc(outage, func() {
					if err := srv.Up(); err != nil {
						t.Error(err)
					}
				})
				return 0
			}
		case !begun || time.Now().After(until) || kind == "down":
			return 0
		}
		inOutage.Add(1)
		if kind == "reset" {
			return feedtest.Reset
		}
		return http.StatusServiceUnavailable
	})
	return srv, inOutage
}

// TestFeedOutageObserved feeds through an outage of 300 ms with an observer
// on both layers: the inner layer's calls are held by the open breaker,
// and each document ends in one DocV1 call that succeeds (a call that gave
// up as the outage began went round again).
func TestFeedOutageObserved(t *testing.T) {
	t.Parallel()
	var (
		holds    atomic.Int64
		held     atomic.Int64 // nanoseconds
		outcomes sync.Map     // "policy outcome" → *atomic.Int64
	)
	const docs, outageAt, outage = 400, 100, 300 * time.Millisecond
	srv, _ := outageServer(t, "503", outageAt, outage)
	cfg := testFeedConfig(srv.URL, nil)
	cfg.MaxProbeInterval = 20 * time.Millisecond
	cfg.Calls = &retries.Observer{
		Hold: func(_ context.Context, _ retries.CallInfo, reason error, d time.Duration) {
			if reason != retries.ErrBreakerOpen {
				t.Errorf("held for %v by %v, want ErrBreakerOpen", d, reason)
			}
			holds.Add(1)
			held.Add(int64(d))
		},
		Done: func(_ context.Context, d retries.CallDone) {
			n, _ := outcomes.LoadOrStore(d.Policy+" "+d.Outcome.String(), new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		},
	}
	res, _, stderr := runTestFeed(t, context.Background(), cfg, puts(docs))
	if !res.Complete() || res.ok != docs {
		t.Fatalf("complete %v, %d acknowledged; want all %d; stderr:\n%s", res.Complete(), res.ok, docs, stderr)
	}
	got := map[string]int64{}
	outcomes.Range(func(k, v any) bool { got[k.(string)] = v.(*atomic.Int64).Load(); return true })
	// A call that gave up before the breaker opened went round again (see
	// awaitWord): one success per document, and nothing but those two.
	others := 0
	for k := range got {
		if k != "DocV1 success" && k != "Throttle success" && k != "DocV1 gave_up" {
			others++
		}
	}
	if got["DocV1 success"] != docs || got["Throttle success"] < docs || others > 0 {
		t.Errorf("calls by policy and outcome %v, want %d DocV1 successes and at least as many Throttle ones, DocV1 giving up at most before the breaker opened, nothing else", got, docs)
	}
	if holds.Load() == 0 || time.Duration(held.Load()) < outage/2 {
		t.Errorf("%d holds for %v in all, want the outage's calls held", holds.Load(), time.Duration(held.Load()))
	}
	t.Logf("%d holds, %v in all; calls %v", holds.Load(), time.Duration(held.Load()), got)
}

// TestFeedWaitsOutAnOutage: a server that answers 503, resets every
// connection, or stops listening for 300 ms in the middle of a feed loses
// it no document. The feed pauses, says why, sends few requests into the
// outage, and resumes.
func TestFeedWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"503", "reset", "down"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const docs, outageAt, outage = 600, 150, 300 * time.Millisecond
			srv, inOutage := outageServer(t, kind, outageAt, outage)
			cfg := testFeedConfig(srv.URL, nil)
			cfg.MaxProbeInterval = 20 * time.Millisecond
			res, sum, stderr := runTestFeed(t, context.Background(), cfg, puts(docs))
			if !res.Complete() || res.ok != docs {
				t.Errorf("complete %v, %d acknowledged; want all %d; stderr:\n%s", res.Complete(), res.ok, docs, stderr)
			}
			if got := appliedIDs(srv); len(got) != docs {
				t.Errorf("%d documents applied, want %d", len(got), docs)
			}
			t.Logf("%d requests during the outage", inOutage.Load())
			// About 20 to open, what was in flight, and a probe every 20 ms.
			if n := inOutage.Load(); n > 120 {
				t.Errorf("%d requests during the outage, want at most 120", n)
			}
			br, _ := sum["retries.breaker"].(map[string]any)
			if br["opened"].(float64) < 1 || br["paused.count"].(float64) < 1 || br["state"] != "closed" {
				t.Errorf("summary breaker = %v, want opened and paused, and closed at the end", br)
			}
			for _, w := range []string{"retries feed: paused: the server is failing (", "retries feed: resumed: "} {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if kind == "503" && !strings.Contains(stderr, "(503 Service Unavailable: fault 503 for /document/v1/ns/d/docid/") {
				t.Errorf("stderr does not give the failure's status and message:\n%s", stderr)
			}
		})
	}
}

// TestFeedOutageFailsNothingInFlight: with few operations in flight, the
// ones in flight as an outage begins use up their attempts (the budget
// refuses their retries) before the breaker has seen failures enough to
// open; before outlast, about 2 of them failed in each outage with 8 in
// flight. Each waits for its endpoint's word instead. Over 20 outages (5
// of each kind, with the limiter held to 8 in flight and with 8 fixed),
// none fails. (Before the last of those in flight, alone on the endpoint
// with room in the window, waited for the word too, one failed in about 90
// outages under a -race run beside two busy processes: 9 in 800, and 0 in
// 800 after.)
func TestFeedOutageFailsNothingInFlight(t *testing.T) {
	t.Parallel()
	const docs = 200
	var failed atomic.Int64
	t.Run("outages", func(t *testing.T) {
		for _, kind := range []string{"503", "reset"} {
			for _, flight := range []string{"limiter 8", "fixed 8"} {
				t.Run(kind+" "+flight, func(t *testing.T) {
					t.Parallel()
					for i := range 5 {
						srv, _ := outageServer(t, kind, 5+i*30, 200*time.Millisecond)
						cfg := testFeedConfig(srv.URL, nil)
						cfg.MaxProbeInterval = 20 * time.Millisecond
						if flight == "fixed 8" {
							cfg.Concurrency = 8
						} else {
							cfg.MaxInFlight = 8
						}
						res, _, stderr := runTestFeed(t, context.Background(), cfg, puts(docs))
						if res.ok != docs {
							failed.Add(int64(docs) - res.ok)
							t.Logf("outage after %d: %d acknowledged of %d; stderr:\n%s", 5+i*30, res.ok, docs, stderr)
						}
					}
				})
			}
		}
	})
	if n := failed.Load(); n > 0 {
		t.Errorf("%d operations failed over 20 outages, want none", n)
	}
}

// TestFeedRedialsUntilTheBreakerOpens: with one or two requests in flight,
// a server that does not listen yet (it comes up after 300 ms) refuses the
// attempts of a few operations before its breaker has seen failures enough
// to open; before redial, 5 of them failed. A refused connection sent
// nothing, so they go round again, and every operation is acknowledged:
// each put, and each increment, which is not safe to repeat, applied once.
func TestFeedRedialsUntilTheBreakerOpens(t *testing.T) {
	t.Parallel()
	for _, c := range []int{1, 2} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			t.Parallel()
			const docs, down = 50, 300 * time.Millisecond
			srv := feedtest.New(t, nil)
			srv.Down()
			time.AfterFunc(down, func() {
				if err := srv.Up(); err != nil {
					t.Error(err)
				}
			})
			cfg := testFeedConfig(srv.URL, nil)
			cfg.MaxProbeInterval = 20 * time.Millisecond
			cfg.Concurrency = c
			var in strings.Builder
			for i := range docs {
				fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{}}`+"\n", i)
				fmt.Fprintf(&in, `{"update":"id:ns:d::inc%d","fields":{"n":{"increment":1}}}`+"\n", i)
			}
			res, sum, stderr := runTestFeed(t, context.Background(), cfg, in.String())
			if !res.Complete() || res.ok != 2*docs {
				t.Fatalf("complete %v, %d acknowledged; want all %d; stderr:\n%s", res.Complete(), res.ok, 2*docs, stderr)
			}
			applied := appliedIDs(srv)
			for i := range docs {
				if n := applied[fmt.Sprint(i)]; n < 1 {
					t.Errorf("document %d applied %d times, want at least once", i, n)
				}
				if n := applied[fmt.Sprintf("inc%d", i)]; n != 1 {
					t.Errorf("inc%d incremented %d times, want once", i, n)
				}
			}
			if br, _ := sum["retries.breaker"].(map[string]any); br["opened"].(float64) < 1 {
				t.Errorf("summary breaker = %v, want it opened", br)
			}
		})
	}
}

// failedOps parses a -failed file: each line one operation.
func failedOps(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var ops []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var op map[string]any
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			t.Fatalf("-failed line %q: %v", sc.Text(), err)
		}
		ops = append(ops, op)
	}
	return ops
}

// TestFeedMaxOutage: a server that stops answering for good ends the feed
// after MaxOutage. The Failed file then holds exactly the operations that
// were not acknowledged, in input order per document, the unread rest of
// the input included, and feeding it finishes the job.
func TestFeedMaxOutage(t *testing.T) {
	t.Parallel()
	var gone atomic.Bool
	var srv *feedtest.Server
	srv = feedtest.New(t, func(*http.Request, int) int {
		if gone.Load() || len(srv.Applied()) >= 100 {
			gone.Store(true)
			return http.StatusServiceUnavailable
		}
		return 0
	})
	// 400 puts, and on every tenth document an update then a remove.
	var in strings.Builder
	var want []string // every operation, as "kind id"
	for i := range 400 {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i, i)
		want = append(want, fmt.Sprintf("put id:ns:d::%d", i))
		if i%10 == 0 {
			fmt.Fprintf(&in, `{"update": "id:ns:d::%d", "fields": {"n": {"assign": 1}}}`+"\n", i)
			fmt.Fprintf(&in, `{"remove":"id:ns:d::%d"}`+"\n", i)
			want = append(want, fmt.Sprintf("update id:ns:d::%d", i), fmt.Sprintf("remove id:ns:d::%d", i))
		}
	}
	var failed bytes.Buffer
	cfg := testFeedConfig(srv.URL, nil)
	cfg.MaxProbeInterval = 20 * time.Millisecond
	cfg.MaxOutage = 200 * time.Millisecond
	cfg.Failed = &failed
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, in.String())
	var oe *outageError
	if res.Complete() || !errors.As(res.Stopped(), &oe) || sum["retries.maxoutage.exceeded"] != true {
		t.Errorf("complete %v, outage %v, summary %v; want the feed ended by the outage", res.Complete(), res.Stopped(), sum["retries.maxoutage.exceeded"])
	}
	if w := "retries feed: stopping: the server has been out for longer than 200ms (-max-outage)"; !strings.Contains(stderr, w) {
		t.Errorf("stderr does not say %q:\n%s", w, stderr)
	}
	// What was applied, and what the file holds, make up the input, in
	// order per document.
	var got []string
	for _, a := range srv.Applied() {
		method, rest, _ := strings.Cut(a, " ")
		path, _, _ := strings.Cut(rest, " ")
		id := "id:ns:d::" + path[strings.LastIndexByte(path, '/')+1:]
		got = append(got, map[string]string{"POST": "put", "PUT": "update", "DELETE": "remove"}[method]+" "+id)
	}
	applied := len(got)
	ops := failedOps(t, failed.Bytes())
	for _, op := range ops {
		for _, k := range []string{"put", "update", "remove"} {
			if id, ok := op[k].(string); ok {
				got = append(got, k+" "+id)
			}
		}
	}
	if sum["retries.failedfile.count"] != float64(len(ops)) || len(ops) == 0 {
		t.Errorf("summary failedfile.count = %v, the file has %d operations", sum["retries.failedfile.count"], len(ops))
	}
	if len(got) != len(want) {
		t.Fatalf("%d applied and %d in the file, want %d in all", applied, len(ops), len(want))
	}
	byID := func(ops []string) map[string][]string {
		m := map[string][]string{}
		for _, o := range ops {
			_, id, _ := strings.Cut(o, " ")
			m[id] = append(m[id], o)
		}
		return m
	}
	gotByID, wantByID := byID(got), byID(want)
	for id, w := range wantByID {
		if !slices.Equal(gotByID[id], w) {
			t.Errorf("%s: applied then written %v, want %v", id, gotByID[id], w)
		}
	}
	// Feeding the file finishes the job.
	srv2 := feedtest.New(t, nil)
	res2, _, stderr2 := runTestFeed(t, context.Background(), testFeedConfig(srv2.URL, nil), failed.String())
	if !res2.Complete() || res2.ok != int64(len(ops)) {
		t.Errorf("feeding the -failed file: complete %v, %d acknowledged, want %d; stderr:\n%s", res2.Complete(), res2.ok, len(ops), stderr2)
	}
}

// TestFeedHoldsBackAfterFailure: after an operation fails, the later ones
// on its document are not sent, so that feeding the failed ones again
// applies them in order; the other documents go on.
func TestFeedHoldsBackAfterFailure(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if r.Method == http.MethodPut {
			return http.StatusBadRequest
		}
		return 0
	})
	in := `{"put":"id:ns:d::x","fields":{"n":1}}
{"update":"id:ns:d::x","fields":{"n":{"assign":2}}}
{"remove":"id:ns:d::x"}
{"put":"id:ns:d::y","fields":{"n":3}}
{"put":"id:ns:d::x",
 "fields":{"n":4}}
`
	var failed bytes.Buffer
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = 1
	cfg.Failed = &failed
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, in)
	if res.ok != 2 || res.failed != 3 || sum["retries.heldback.count"] != 2.0 {
		t.Errorf("ok %d, failed %d, held back %v; want 2, 3, 2; stderr:\n%s", res.ok, res.failed, sum["retries.heldback.count"], stderr)
	}
	for _, w := range []string{
		"failed: line 2: update id:ns:d::x: 400 Bad Request",
		"not sent: line 3: remove id:ns:d::x: an earlier operation on the document failed",
		"not sent: line 5: put id:ns:d::x: an earlier operation on the document failed",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
	want := `{"update":"id:ns:d::x","fields":{"n":{"assign":2}}}
{"remove":"id:ns:d::x"}
{"put":"id:ns:d::x","fields":{"n":4}}
`
	if failed.String() != want {
		t.Errorf("-failed file:\n%s\nwant:\n%s", failed.String(), want)
	}
}

// TestFeedInterruptDuringOutage: an interrupt while the feed is paused by
// an outage ends it at once, without waiting out the grace: nothing is on
// the wire but probes, which the server answers. What was not
// acknowledged is reported as not sent or failed, and written.
func TestFeedInterruptDuringOutage(t *testing.T) {
	t.Parallel()
	srv, _ := outageServer(t, "503", 50, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newSignalWriter("retries feed: paused: ")
	go func() {
		<-w.found
		cancel()
	}()
	var failed bytes.Buffer
	cfg := testFeedConfig(srv.URL, w)
	cfg.MaxProbeInterval = 20 * time.Millisecond
	cfg.Grace = time.Hour
	cfg.Failed = &failed
	done := make(chan Report)
	go func() {
		res, _, _ := runTestFeed(t, ctx, cfg, puts(400))
		done <- res
	}()
	var res Report
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the interrupted feed waits out its grace; stderr:\n%s", w)
	}
	lines := int64(bytes.Count(failed.Bytes(), []byte("\n")))
	if res.ok+lines != 400 || len(res.unsent) == 0 {
		t.Errorf("%d acknowledged and %d written (%d not sent), want 400 in all; stderr:\n%s", res.ok, lines, len(res.unsent), w)
	}
}

// TestSettleWritesUnsentInInputOrder: the operations a stop left unsent
// are written to the -failed file in input order, whatever order their
// goroutines ended in, so that a document's put comes before its update.
func TestSettleWritesUnsentInInputOrder(t *testing.T) {
	t.Parallel()
	var failed bytes.Buffer
	cfg := testFeedConfig("http://127.0.0.1:1", nil)
	cfg.Failed = &failed
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ops []*operation
	for i, text := range []string{`{"put":"id:ns:d::1","fields":{}}`, `{"update":"id:ns:d::1","fields":{"x":{"assign":1}}}`, `{"remove":"id:ns:d::1"}`} {
		for op, err := range Read(strings.NewReader(text)) {
			if err != nil {
				t.Fatal(err)
			}
			o, err := prepare(op)
			if err != nil {
				t.Fatal(err)
			}
			o.seq = int64(i + 1)
			ops = append(ops, o)
		}
	}
	r := c.newRun(t.Context(), nil)
	for _, op := range []*operation{ops[1], ops[2], ops[0]} { // as their goroutines ended
		r.addUnsent(op)
	}
	var res Report
	r.settle(&res)
	var got []string
	for _, op := range failedOps(t, failed.Bytes()) {
		for _, k := range []string{"put", "update", "remove"} {
			if _, ok := op[k]; ok {
				got = append(got, k)
			}
		}
	}
	if want := []string{"put", "update", "remove"}; !slices.Equal(got, want) {
		t.Errorf("the -failed file holds %v, want %v", got, want)
	}
}

// TestFeedDeadPortSaidAtOnce: against a port where nothing listens, the
// feed's pause says the refusal and that no request has got a response,
// as its breaker opens (within a second or two), where it said "check
// -url" only at FirstResponse (30 s).
func TestFeedDeadPortSaidAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newSignalWriter("retries feed: paused: ")
	go func() {
		<-w.found
		cancel()
	}()
	runTestFeed(t, ctx, testFeedConfig(dead, w), puts(10))
	if out := w.String(); !strings.Contains(out, "paused: the server is failing (") || !strings.Contains(out, "refused); no request has got a response yet: check the URL;") {
		t.Errorf("the log:\n%s\nwant the pause to say the refusal, and that no request got a response", out)
	}
}
