package feed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// testFeedConfig is the command's configuration without waits between
// retries, so that tests run at loopback speed.
func testFeedConfig(url string, errOut io.Writer) Config {
	none := retries.WithWait(retries.WaitNone())
	return Config{
		URL: url, Timeout: 20 * time.Second, AttemptTimeout: 10 * time.Second, Grace: 10 * time.Second,
		Outer: retries.DocV1.Copy(none), Inner: retries.Throttle.Copy(none),
		Budget: retries.NewBudget(0.1, 5), // the feed command's
		Log:    errOut,
	}
}

// runTestFeed feeds input with cfg and returns the result, the summary
// parsed and stderr.
func runTestFeed(t *testing.T, ctx context.Context, cfg Config, input string) (Report, map[string]any, string) {
	t.Helper()
	var errOut bytes.Buffer
	if cfg.Log == nil {
		cfg.Log = &errOut
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	res := feedReport(f, ctx, strings.NewReader(input))
	out := res.Summary()
	var sum map[string]any
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	return res, sum, errOut.String()
}

func TestDocumentPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, id, want string
	}{
		{"docid", "id:music:song::a1", "/document/v1/music/song/docid/a1"},
		{"group", "id:music:song:g=mygroup:a1", "/document/v1/music/song/group/mygroup/a1"},
		{"number", "id:music:song:n=123:a1", "/document/v1/music/song/number/123/a1"},
		{"colons_in_id", "id:ns:t::a:b:c", "/document/v1/ns/t/docid/a:b:c"},
		{"slash_and_query", "id:ns:t::a/b?c#d", "/document/v1/ns/t/docid/a%2Fb%3Fc%23d"},
		{"space_percent", "id:ns:t::a b%20", "/document/v1/ns/t/docid/a%20b%2520"},
		{"unicode", "id:ns:t::ø", "/document/v1/ns/t/docid/%C3%B8"},
		{"escaped_namespace_and_group", "id:n s:t/x:g=a/b:c", "/document/v1/n%20s/t%2Fx/group/a%2Fb/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := documentPath(tc.id)
			if err != nil || got != tc.want {
				t.Errorf("documentPath(%q) = %q, %v, want %q", tc.id, got, err, tc.want)
			}
		})
	}
	for _, id := range []string{"", "music:song::a", "id:music:song:a", "id::song::a", "id:music:::a", "id:music:song::",
		"id:music:song:n=x:a", "id:music:song:g=:a", "id:music:song:x=1:a"} {
		t.Run("invalid_"+id, func(t *testing.T) {
			if got, err := documentPath(id); err == nil {
				t.Errorf("documentPath(%q) = %q, want an error", id, got)
			}
		})
	}
}

func TestParseOp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in     string
		kind         Kind
		path, body   string
		safe         bool
		errSubstring string
	}{
		{name: "put", in: `{"put":"id:a:b::1","fields":{"x":1}}`, kind: Put, path: "/document/v1/a/b/docid/1", body: `{"fields":{"x":1}}`, safe: true},
		{name: "update", in: `{"update":"id:a:b::1","fields":{"x":{"assign":2}}}`, kind: Update, path: "/document/v1/a/b/docid/1", body: `{"fields":{"x":{"assign":2}}}`, safe: true},
		{name: "update_create", in: `{"update":"id:a:b::1","create":true,"fields":{"x":{"assign":2}}}`, kind: Update, path: "/document/v1/a/b/docid/1?create=true", body: `{"fields":{"x":{"assign":2}}}`, safe: true},
		{name: "update_create_false", in: `{"update":"id:a:b::1","create":false,"fields":{"x":{"assign":2}}}`, kind: Update, path: "/document/v1/a/b/docid/1", body: `{"fields":{"x":{"assign":2}}}`, safe: true},
		{name: "update_condition", in: `{"update":"id:a:b::1","condition":"b.x==1 & b.y=='a b'","fields":{"x":{"assign":2}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1?condition=b.x%3D%3D1+%26+b.y%3D%3D%27a+b%27", body: `{"fields":{"x":{"assign":2}}}`},
		{name: "update_create_condition", in: `{"update":"id:a:b::1","create":true,"condition":"b.x","fields":{"x":{"assign":2}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1?condition=b.x&create=true", body: `{"fields":{"x":{"assign":2}}}`},
		{name: "update_increment", in: `{"update":"id:a:b::1","fields":{"n":{"increment":1}}}`, kind: Update, path: "/document/v1/a/b/docid/1", body: `{"fields":{"n":{"increment":1}}}`},
		{name: "update_array_add", in: `{"update":"id:a:b::1","fields":{"tags":{"add":["x"]}}}`, kind: Update, path: "/document/v1/a/b/docid/1", body: `{"fields":{"tags":{"add":["x"]}}}`},
		{name: "update_match_increment", in: `{"update":"id:a:b::1","fields":{"w":{"match":{"element":"x","increment":1}}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1", body: `{"fields":{"w":{"match":{"element":"x","increment":1}}}}`},
		{name: "update_match_assign", in: `{"update":"id:a:b::1","fields":{"w":{"match":{"element":"x","assign":1}}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1", body: `{"fields":{"w":{"match":{"element":"x","assign":1}}}}`, safe: true},
		{name: "update_collection_remove", in: `{"update":"id:a:b::1","fields":{"tags":{"remove":{"x":0}}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1", body: `{"fields":{"tags":{"remove":{"x":0}}}}`, safe: true},
		{name: "update_unknown_operation", in: `{"update":"id:a:b::1","fields":{"n":{"incremnt":1}}}`, kind: Update,
			path: "/document/v1/a/b/docid/1", body: `{"fields":{"n":{"incremnt":1}}}`},
		{name: "remove", in: `{"remove":"id:a:b:g=g1:1"}`, kind: Remove, path: "/document/v1/a/b/group/g1/1", safe: true},
		{name: "remove_condition", in: `{"remove":"id:a:b::1","condition":"b.x==1"}`, kind: Remove, path: "/document/v1/a/b/docid/1?condition=b.x%3D%3D1", safe: true},
		{name: "not_json", in: `{"put":`, errSubstring: "invalid JSON: unexpected end of input"},
		{name: "unknown_key", in: `{"put":"id:a:b::1","fields":{},"condtion":"x"}`, errSubstring: `unknown key "condtion"`},
		{name: "two_kinds", in: `{"put":"id:a:b::1","remove":"id:a:b::1","fields":{}}`, errSubstring: "exactly one"},
		{name: "no_kind", in: `{"fields":{}}`, errSubstring: "exactly one"},
		{name: "remove_with_fields", in: `{"remove":"id:a:b::1","fields":{}}`, errSubstring: `a remove has no "fields"`},
		{name: "put_without_fields", in: `{"put":"id:a:b::1"}`, errSubstring: `put without "fields"`},
		{name: "fields_not_object", in: `{"put":"id:a:b::1","fields":[1]}`, errSubstring: "not an object"},
		{name: "create_on_put", in: `{"put":"id:a:b::1","create":true,"fields":{}}`, kind: Put, path: "/document/v1/a/b/docid/1?create=true", body: `{"fields":{}}`, safe: true},
		{name: "create_on_remove", in: `{"remove":"id:a:b::1","create":true}`, errSubstring: `"create" is for a put or an update, not a remove`},
		{name: "bad_id", in: `{"put":"doc1","fields":{}}`, errSubstring: "invalid document id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, err := readOne(strings.Repeat("\n", 6) + tc.in)
			if tc.errSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstring) {
					t.Errorf("parseOp(%s) error = %v, want one containing %q", tc.in, err, tc.errSubstring)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseOp(%s) error = %v", tc.in, err)
			}
			if op.kind != tc.kind || op.path != tc.path || string(op.body) != tc.body || op.safe != tc.safe || op.line != 7 {
				t.Errorf("parseOp(%s) = %v %q %s safe=%v line %d, want %v %q %s safe=%v line 7",
					tc.in, op.kind, op.path, op.body, op.safe, op.line, tc.kind, tc.path, tc.body, tc.safe)
			}
		})
	}
}

// readOne reads the first operation of text, as a feed does.
func readOne(text string) (*operation, error) {
	return newOpReader(strings.NewReader(text)).next()
}

const threeOps = `{"put": "id:ns:doc::1", "fields": {"title": "one"}}
{"update": "id:ns:doc::2", "create": true, "fields": {"title": {"assign": "two"}}}

{"remove": "id:ns:doc:n=5:3"}
`

func TestFeedSummaryKeys(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		if n == 0 {
			return http.StatusTooManyRequests
		}
		return 0
	})
	_, sum, _ := runTestFeed(t, context.Background(), testFeedConfig(srv.URL, nil), threeOps)
	for _, k := range []string{
		"feeder.operation.count", "feeder.seconds", "feeder.ok.count", "feeder.ok.rate", "feeder.error.count",
		"feeder.inflight.count", "http.request.count", "http.request.bytes", "http.request.MBps",
		"http.exception.count", "http.response.count", "http.response.bytes", "http.response.MBps",
		"http.response.error.count", "http.response.latency.millis.min", "http.response.latency.millis.avg",
		"http.response.latency.millis.max", "http.response.code.counts", "retries.limiter", "retries.budget",
		"retries.retry.count",
	} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary has no key %q", k)
		}
	}
	for k, want := range map[string]float64{
		"feeder.operation.count": 3, "feeder.ok.count": 3, "feeder.error.count": 0,
		"http.request.count": 6, "http.response.count": 6, "http.response.error.count": 3,
		"retries.retry.count": 3, "http.exception.count": 0,
	} {
		if sum[k] != want {
			t.Errorf("summary %q = %v, want %v", k, sum[k], want)
		}
	}
	codes, _ := sum["http.response.code.counts"].(map[string]any)
	if codes["200"] != 3.0 || codes["429"] != 3.0 {
		t.Errorf("code counts = %v, want 3×200 and 3×429", codes)
	}
	lim, _ := sum["retries.limiter"].(map[string]any)
	if lim["throttles"] != 3.0 || lim["successes"] != 3.0 || lim["limit"] == nil {
		t.Errorf("limiter = %v, want 3 throttles, 3 successes and a limit", lim)
	}
}

// TestFeedNothingLost feeds through a server that resets connections and
// answers 502, 503 and 504: every safe operation is applied exactly once,
// and the operations on one document in input order.
func TestFeedNothingLost(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		plan := [][]int{{}, {feedtest.Reset}, {http.StatusBadGateway}, {http.StatusGatewayTimeout, feedtest.Reset},
			{http.StatusServiceUnavailable, http.StatusBadGateway}, {http.StatusTooManyRequests, feedtest.Reset, http.StatusTooManyRequests}}
		i := len(r.URL.Path) % len(plan)
		if p := plan[i]; n < len(p) {
			return p[n]
		}
		return 0
	})
	var in strings.Builder
	const docs = 60
	for i := range docs {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i, i)
		if i%10 == 0 { // more operations on the same document, to be applied in order
			fmt.Fprintf(&in, `{"update":"id:ns:d::%d","fields":{"n":{"assign":1}}}`+"\n", i)
			fmt.Fprintf(&in, `{"remove":"id:ns:d::%d"}`+"\n", i)
		}
	}
	cfg := testFeedConfig(srv.URL, nil)
	cfg.NoBudget = true // this test retries more than a budget allows
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, in.String())
	if res.failed != 0 || res.ok != docs+12 {
		t.Errorf("ok, failed = %d, %d, want %d, 0; stderr:\n%s", res.ok, res.failed, docs+12, stderr)
	}
	applied := srv.Applied()
	count := map[string]int{}
	order := map[string][]string{}
	for _, a := range applied {
		method, rest, _ := strings.Cut(a, " ")
		path, _, _ := strings.Cut(rest, " ")
		count[method+" "+path]++
		order[path] = append(order[path], method)
	}
	for k, n := range count {
		if n != 1 {
			t.Errorf("%s applied %d times, want once", k, n)
		}
	}
	if len(count) != docs+12 {
		t.Errorf("%d operations applied, want %d", len(count), docs+12)
	}
	for i := 0; i < docs; i += 10 {
		p := fmt.Sprintf("/document/v1/ns/d/docid/%d", i)
		if want := []string{"POST", "PUT", "DELETE"}; !slices.Equal(order[p], want) {
			t.Errorf("%s applied in order %v, want %v", p, order[p], want)
		}
	}
	if sum["http.exception.count"].(float64) == 0 || sum["retries.retry.count"].(float64) == 0 {
		t.Errorf("no resets or retries counted: %v", sum)
	}
}

// TestFeedUnsafeNotRetried checks that an update with a condition or
// arithmetic is not repeated after a 502 or a reset, whose outcome is
// unknown, but is after a 503 or a 429, which say it was not applied.
func TestFeedUnsafeNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		op       string
		fault    int
		requests int
		failed   bool
	}{
		{"condition_502", `{"update":"id:a:b::1","condition":"b.x==1","fields":{"x":{"assign":2}}}`, http.StatusBadGateway, 1, true},
		{"condition_504", `{"update":"id:a:b::1","condition":"b.x==1","fields":{"x":{"assign":2}}}`, http.StatusGatewayTimeout, 1, true},
		{"condition_reset", `{"update":"id:a:b::1","condition":"b.x==1","fields":{"x":{"assign":2}}}`, feedtest.Reset, 1, true},
		{"increment_502", `{"update":"id:a:b::1","fields":{"n":{"increment":1}}}`, http.StatusBadGateway, 1, true},
		{"condition_503", `{"update":"id:a:b::1","condition":"b.x==1","fields":{"x":{"assign":2}}}`, http.StatusServiceUnavailable, 2, false},
		{"condition_429", `{"update":"id:a:b::1","condition":"b.x==1","fields":{"x":{"assign":2}}}`, http.StatusTooManyRequests, 2, false},
		{"assign_502", `{"update":"id:a:b::1","fields":{"x":{"assign":2}}}`, http.StatusBadGateway, 2, false},
		{"put_reset", `{"put":"id:a:b::1","fields":{"x":2}}`, feedtest.Reset, 2, false},
		{"remove_504", `{"remove":"id:a:b::1"}`, http.StatusGatewayTimeout, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := feedtest.New(t, func(_ *http.Request, n int) int {
				if n == 0 {
					return tc.fault
				}
				return 0
			})
			res, _, stderr := runTestFeed(t, context.Background(), testFeedConfig(srv.URL, nil), tc.op+"\n")
			op, _ := readOne(tc.op)
			if got := srv.Requests(op.kind.method(), op.path); got != tc.requests {
				t.Errorf("server got %d requests, want %d", got, tc.requests)
			}
			if failed := res.failed > 0; failed != tc.failed {
				t.Errorf("failed = %v, want %v; stderr:\n%s", failed, tc.failed, stderr)
			}
			if tc.failed && !strings.Contains(stderr, "failed: line 1: ") {
				t.Errorf("stderr does not report the failure:\n%s", stderr)
			}
		})
	}
}

// answers is the fault of a server that answers a conditional operation
// 412, one on a document named missing 404, one on a document named bad
// 400, and one on a document named precondition 412, with a condition or
// not.
func answers(r *http.Request, _ int) int {
	switch {
	case r.URL.Query().Has("condition"):
		return http.StatusPreconditionFailed
	case strings.HasSuffix(r.URL.Path, "/missing"):
		return http.StatusNotFound
	case strings.HasSuffix(r.URL.Path, "/bad"):
		return http.StatusBadRequest
	case strings.HasSuffix(r.URL.Path, "/precondition"):
		return http.StatusPreconditionFailed
	}
	return 0
}

// TestFeedAnswers checks which answers count as acknowledged: 2xx, a 412
// (condition not met) and a 404 for a remove; a 404 for a put fails.
func TestFeedAnswers(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, answers)
	input := `{"update":"id:a:b::1","condition":"false","fields":{"x":{"assign":1}}}
{"remove":"id:a:b::missing"}
{"put":"id:a:b::missing","fields":{}}
`
	res, sum, stderr := runTestFeed(t, context.Background(), testFeedConfig(srv.URL, nil), input)
	if res.ok != 2 || res.failed != 1 || res.condFailed != 1 || res.notFound != 1 {
		t.Errorf("ok, failed, 412s, 404s = %d, %d, %d, %d, want 2, 1, 1, 1", res.ok, res.failed, res.condFailed, res.notFound)
	}
	if !strings.Contains(stderr, "line 3: put id:a:b::missing: 404 Not Found") || strings.Count(stderr, "failed:") != 1 {
		t.Errorf("stderr should report the put's 404 only:\n%s", stderr)
	}
	if sum["retries.conditionnotmet.count"] != 1.0 || sum["retries.remove.notfound.count"] != 1.0 {
		t.Errorf("summary 412s, 404s = %v, %v, want 1, 1", sum["retries.conditionnotmet.count"], sum["retries.remove.notfound.count"])
	}
}

// TestFeedInterrupt cancels the feed while a request is in flight: the feed
// waits the grace period for it, then cancels it, names what it did not
// send, and prints the summary.
func TestFeedInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan struct{})
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/2") {
			close(blocked)
			<-r.Context().Done() // until the client gives up
			return http.StatusInternalServerError
		}
		return 0
	})
	go func() {
		<-blocked
		cancel()
	}()
	var in strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
	}
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = 1
	cfg.Grace = 50 * time.Millisecond
	res, sum, stderr := runTestFeed(t, ctx, cfg, in.String())
	// Line 4 was taken from the input by the reading goroutine, waiting
	// for a place: it is not sent, and told so.
	if res.ok != 1 || len(res.unsent) != 2 || res.unsent[0].id != "id:a:b::3" || res.unsent[1].id != "id:a:b::4" {
		t.Errorf("ok %d, unsent %v, want 1 and [id:a:b::3 id:a:b::4]", res.ok, res.unsent)
	}
	for _, w := range []string{
		"failed: line 2: put id:a:b::2:",
		"not sent: line 3: put id:a:b::3",
		"not sent: line 4: put id:a:b::4",
		"interrupted: the input from line 5 on was not read",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
	if ids, _ := sum["retries.unsent.ids"].([]any); len(ids) != 2 || ids[0] != "id:a:b::3" {
		t.Errorf("summary unsent ids = %v, want [id:a:b::3 id:a:b::4]", sum["retries.unsent.ids"])
	}
	if sum["feeder.error.count"] != 3.0 || sum["retries.unread.line"] != 5.0 {
		t.Errorf("summary errors, unread line = %v, %v, want 3, 5", sum["feeder.error.count"], sum["retries.unread.line"])
	}
}

func TestFeedHTTP2(t *testing.T) {
	t.Parallel()
	s := feedtest.NewH2C(t)
	cfg := testFeedConfig(s.URL, nil)
	cfg.HTTP2 = true
	res, _, stderr := runTestFeed(t, context.Background(), cfg, threeOps)
	if res.ok != 3 {
		t.Fatalf("ok = %d, want 3; stderr:\n%s", res.ok, stderr)
	}
	for _, proto := range s.Protos() {
		if proto != 2 {
			t.Errorf("request over HTTP/%d, want HTTP/2", proto)
		}
	}
}

// TestFeedProgress waits for a progress line while a request is held.
func TestFeedProgress(t *testing.T) {
	t.Parallel()
	w := newSignalWriter(" in flight, limit ")
	srv := holdUntilWritten(t, w)
	cfg := testFeedConfig(srv.URL, w)
	cfg.Progress = 5 * time.Millisecond
	res, _, _ := runTestFeed(t, context.Background(), cfg, threeOps)
	if res.ok != 3 {
		t.Errorf("ok = %d, want 3", res.ok)
	}
	if !w.seen() {
		t.Errorf("no progress line; stderr:\n%s", w.String())
	}
}

// signalWriter closes found when what was written contains want.
type signalWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	want  string
	found chan struct{}
	once  sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, found: make(chan struct{})}
}

// seen reports whether want has been written.
func (w *signalWriter) seen() bool {
	select {
	case <-w.found:
		return true
	default:
		return false
	}
}

// holdUntilWritten starts a server that holds each request until w has
// seen what it waits for, or 10 s at most.
func holdUntilWritten(t *testing.T, w *signalWriter) *feedtest.Server {
	t.Helper()
	return feedtest.New(t, func(r *http.Request, _ int) int {
		select {
		case <-w.found:
		case <-time.After(10 * time.Second):
		}
		return 0
	})
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.found) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestFeedBudgetRefusal checks that a retry the budget refuses fails the
// operation with the last status and the reason.
func TestFeedBudgetRefusal(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(_ *http.Request, n int) int {
		if n == 0 {
			return http.StatusBadGateway
		}
		return 0
	})
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Budget = retries.NewBudget(0, 0) // no retries at all
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, `{"put":"id:a:b::1","fields":{}}`+"\n")
	if res.failed != 1 || srv.Requests("POST", "/document/v1/a/b/docid/1") != 1 {
		t.Errorf("failed %d after %d requests, want 1 after 1", res.failed, srv.Requests("POST", "/document/v1/a/b/docid/1"))
	}
	if !strings.Contains(stderr, "failed: line 1: put id:a:b::1: 502 Bad Gateway; retries: retry budget exhausted") {
		t.Errorf("stderr does not give the status and the budget:\n%s", stderr)
	}
	if b, _ := sum["retries.budget"].(map[string]any); b["refused"] != 1.0 {
		t.Errorf("summary budget = %v, want refused 1", sum["retries.budget"])
	}
}

// TestFeedInterruptWhileReading interrupts a feed whose input blocks, as a
// quiet pipe on stdin does: the feed ends anyway and says what it did not
// read.

// TestFeedRequestParams: route, tracelevel, timeout and dryRun go with
// every operation, after its own condition and create, as Vespa's clients
// send them; a failed operation's report quotes the trace.
func TestFeedRequestParams(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Route, cfg.TraceLevel, cfg.ServerTimeout, cfg.DryRun = "a/b c", 3, 5500*time.Millisecond, true
	in := `{"put":"id:ns:d::1","fields":{}}
{"update":"id:ns:d::2","create":true,"condition":"d.x==1","fields":{}}
{"remove":"id:ns:d::3"}
`
	res, _, stderr := runTestFeed(t, context.Background(), cfg, in)
	if !res.Complete() {
		t.Fatalf("feed incomplete; stderr:\n%s", stderr)
	}
	const params = "dryRun=true&route=a%2Fb+c&timeout=5500ms&tracelevel=3"
	want := []string{
		"POST /document/v1/ns/d/docid/1?" + params + ` {"fields":{}}`,
		"PUT /document/v1/ns/d/docid/2?condition=d.x%3D%3D1&create=true&" + params + ` {"fields":{}}`,
		"DELETE /document/v1/ns/d/docid/3?" + params,
	}
	got := srv.Applied()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("applied:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	tracing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"message": "no such field", "trace": [ {"message": "parsed"} ]}`)
	}))
	defer tracing.Close()
	cfg = testFeedConfig(tracing.URL, nil)
	cfg.TraceLevel = 1
	_, _, stderr = runTestFeed(t, context.Background(), cfg, `{"put":"id:ns:d::1","fields":{"x":1}}`)
	if w := `400 Bad Request: no such field; trace: [{"message":"parsed"}]`; !strings.Contains(stderr, w) {
		t.Errorf("stderr does not quote the trace %q:\n%s", w, stderr)
	}
}

// TestFeedProgressJSON: with ProgressJSON each report is one line of JSON
// with the summary's keys so far: the three operations read while none is
// acknowledged yet.
func TestFeedProgressJSON(t *testing.T) {
	t.Parallel()
	w := newSignalWriter(`"feeder.operation.count":3,"feeder.seconds":`)
	srv := holdUntilWritten(t, w)
	cfg := testFeedConfig(srv.URL, nil)
	cfg.ProgressOut, cfg.Progress, cfg.ProgressJSON, cfg.Terminal = w, 5*time.Millisecond, true, true
	res, _, _ := runTestFeed(t, context.Background(), cfg, threeOps)
	if res.ok != 3 {
		t.Errorf("ok = %d, want 3", res.ok)
	}
	if !w.seen() {
		t.Fatalf("no progress line with 3 operations read:\n%s", w.String())
	}
	for _, line := range strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("progress line %q is not JSON: %v", line, err)
		}
		if _, ok := m["http.request.count"]; !ok || m["feeder.ok.count"] == nil {
			t.Errorf("progress line %q lacks the summary's keys", line)
		}
	}
}

// TestFeedCompression: auto gzips the bodies over 512 bytes only, gzip all
// of them and none none; the server reads each as it was, and a retry
// sends the same compressed bytes again.
func TestFeedCompression(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 600)
	in := `{"put":"id:ns:d::small","fields":{"t":"a"}}` + "\n" + `{"put":"id:ns:d::big","fields":{"t":"` + big + `"}}` + "\n" + `{"remove":"id:ns:d::gone"}` + "\n"
	for _, tc := range []struct {
		c    Compression
		want map[string]bool // gzipped, by document
	}{
		{CompressAuto, map[string]bool{"small": false, "big": true, "gone": false}},
		{CompressGzip, map[string]bool{"small": true, "big": true, "gone": false}},
		{CompressNone, map[string]bool{"small": false, "big": false, "gone": false}},
	} {
		var mu sync.Mutex
		gzipped := map[string][]bool{}
		srv := feedtest.New(t, func(r *http.Request, n int) int {
			doc := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
			mu.Lock()
			gzipped[doc] = append(gzipped[doc], r.Header.Get("Content-Encoding") == "gzip")
			mu.Unlock()
			if n == 0 && doc == "big" {
				return http.StatusServiceUnavailable // retried: the same bytes again
			}
			return 0
		})
		cfg := testFeedConfig(srv.URL, nil)
		cfg.Compression = tc.c
		res, _, stderr := runTestFeed(t, context.Background(), cfg, in)
		if !res.Complete() {
			t.Fatalf("compression %d: feed incomplete; stderr:\n%s", tc.c, stderr)
		}
		for doc, want := range tc.want {
			for i, got := range gzipped[doc] {
				if got != want {
					t.Errorf("compression %d: %s attempt %d gzipped %v, want %v", tc.c, doc, i+1, got, want)
				}
			}
		}
		if len(gzipped["big"]) != 2 {
			t.Errorf("big sent %d times, want 2 (a 503, then a retry)", len(gzipped["big"]))
		}
		applied := strings.Join(srv.Applied(), "\n")
		if !strings.Contains(applied, `POST /document/v1/ns/d/docid/big {"fields":{"t":"`+big+`"}}`) ||
			!strings.Contains(applied, `POST /document/v1/ns/d/docid/small {"fields":{"t":"a"}}`) {
			t.Errorf("compression %d: the server read:\n%s", tc.c, applied)
		}
	}
	for _, s := range []string{"auto", "gzip", "none"} {
		if _, err := ParseCompression(s); err != nil {
			t.Errorf("ParseCompression(%q) = %v", s, err)
		}
	}
	if _, err := ParseCompression("zstd"); err == nil {
		t.Error("ParseCompression(zstd) = nil error")
	}
}

// TestFeedInterruptSendsNothingNew: after an interrupt, the requests on
// the wire are answered, and nothing else goes out: the operations
// dispatched but waiting for the limiter are reported as not sent, even
// when the interrupt's message makes the server answer those on the wire
// at once (it freed permits to them before the message halted them, in
// about one run in 15). The interrupt says at once what the feed waits
// for.
func TestFeedInterruptSendsNothingNew(t *testing.T) {
	t.Parallel()
	const first = initialInFlight // the limiter's first limit
	const n = first + 16
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newSignalWriter(fmt.Sprintf("retries feed: interrupted: waiting up to 10s for the %d requests in flight; interrupt again to quit at once", first))
	held := make(chan struct{}, n)
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		held <- struct{}{}
		select {
		case <-w.found:
		case <-r.Context().Done():
		}
		return 0
	})
	go func() {
		for range first {
			<-held
		}
		cancel()
	}()
	cfg := testFeedConfig(srv.URL, w)
	res, sum, _ := runTestFeed(t, ctx, cfg, puts(n))
	requests := 0
	for i := range n {
		requests += srv.Requests(http.MethodPost, fmt.Sprintf("/document/v1/ns/d/docid/%d", i))
	}
	if requests != first || res.ok != first {
		t.Errorf("%d requests, %d acknowledged; want the %d on the wire at the interrupt and no other; stderr:\n%s", requests, res.ok, first, w)
	}
	// What the feed had read is not sent, and told so; the rest of the
	// input is not read (the interrupt can come before the reading has
	// taken it all).
	unsent, unread := sum["retries.unsent.count"], sum["retries.unread.line"]
	if unread == nil || unread == 0.0 { // all read
		unread = float64(n + 1)
	}
	if unsent != unread.(float64)-(first+1) || sum["feeder.error.count"] != unsent {
		t.Errorf("unsent %v, errors %v, unread from line %v; want lines %d to the first unread not sent; stderr:\n%s", unsent, sum["feeder.error.count"], unread, first+1, w)
	}
	if strings.Contains(w.String(), "failed:") {
		t.Errorf("an operation not sent is reported as failed:\n%s", w)
	}
}

// TestFeedConnections: over HTTP/2 the feed opens Connections connections
// per endpoint (DefaultConnections when 0) and spreads its requests over
// them; over HTTP/1.1, Connections caps them.
func TestFeedConnections(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		http2       bool
		connections int
		want        int
		atMost      bool
	}{
		{"h2_default", true, 0, DefaultConnections, false},
		{"h2_3", true, 3, 3, false},
		{"h1_2", false, 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := feedtest.NewH2C(t)
			cfg := testFeedConfig(s.URL, nil)
			cfg.HTTP2, cfg.Connections = tc.http2, tc.connections
			res, _, stderr := runTestFeed(t, context.Background(), cfg, puts(200))
			if res.ok != 200 {
				t.Fatalf("ok = %d, want 200; stderr:\n%s", res.ok, stderr)
			}
			if got := s.Conns(); got != tc.want && !(tc.atMost && got < tc.want) {
				t.Errorf("%d connections, want %d", got, tc.want)
			}
		})
	}
}

// feedReport feeds what r holds with f, and returns the Feed's report.
func feedReport(f *Client, ctx context.Context, r io.Reader) Report {
	_ = f.Feed(ctx, Read(r), nil)
	return f.Report()
}
