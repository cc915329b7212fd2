package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// The answers of Vespa's search handler, as its status mapping writes them
// (VespaHeaders.getStatus): a 200 with hits, with errors beside them, or
// with a degraded coverage; a 400 for an illegal query; a 500 soft doomed;
// a 503 with no search thread free; a 504 with no hits.
const (
	okBody       = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":2},"coverage":{"coverage":100,"documents":10,"full":true,"nodes":1,"results":1,"resultsFull":1},"children":[{"id":"id:music:music::1","relevance":0.9,"source":"music","fields":{"title":"a"}},{"id":"id:music:music::2","relevance":0.5,"source":"music","fields":{"title":"b"}}]}}`
	errorsBody   = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"errors":[{"code":12,"summary":"Timed out","source":"music","message":"one node did not answer"}],"children":[{"id":"id:music:music::1","relevance":0.9,"fields":{}}]}}`
	degradedBody = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"coverage":{"coverage":50,"documents":5,"full":false,"nodes":1,"results":1,"resultsFull":0,"degraded":{"match-phase":false,"timeout":true,"adaptive-timeout":false,"non-ideal-state":false}},"children":[]}}`
	illegalBody  = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":3,"summary":"Illegal query","message":"Could not parse 'select'"}]}}`
	doomedBody   = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":12,"summary":"Timed out","message":"Query soft doomed during query setup"}]}}`
	noThreadBody = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":10,"summary":"Backend communication error","message":"No search threads available"}]}}`
)

// vespa is a container that answers each query as its "case" parameter
// says, the first ask of a case in "then" with the first status and the
// next with 200; it records each request's timeout.
type vespa struct {
	mu       sync.Mutex
	asked    map[string]int
	first    map[string]string // case: the endpoint first asked
	timeouts []string
}

func (v *vespa) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		r.URL.RawQuery += "&case=" + fmt.Sprint(m["case"]) + "&bodytimeout=" + fmt.Sprint(m["timeout"])
	}
	q := r.URL.Query()
	c := q.Get("case")
	v.mu.Lock()
	n := v.asked[c]
	v.asked[c]++
	if n == 0 {
		v.first[c] = "http://" + r.Host
	}
	v.timeouts = append(v.timeouts, q.Get("timeout")+q.Get("bodytimeout"))
	v.mu.Unlock()
	status, body := http.StatusOK, okBody
	switch c {
	case "errors":
		body = errorsBody
	case "degraded":
		body = degradedBody
	case "illegal":
		status, body = http.StatusBadRequest, illegalBody
	case "doomed":
		status, body = http.StatusInternalServerError, doomedBody
	case "html":
		body = "<html>a proxy's page</html>"
	case "503", "504", "429":
		if n == 0 {
			fmt.Sscan(c, &status)
			body = noThreadBody
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// endpointOf returns the endpoint that was first asked a case.
func endpointOf(v *vespa, c string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.first[c]
}

func newVespa(t *testing.T) (*vespa, string) {
	v := &vespa{asked: map[string]int{}, first: map[string]string{}}
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return v, srv.URL
}

// TestClassification: each of Vespa's answers, row by row: a 200 is
// returned as it is, errors and partial coverage typed, and never asked
// again; a 400, a soft doomed 500 and a 200 that is no Vespa result are
// never asked again; a 503, a 504 and a 429 are asked again, of the next
// endpoint, and the query then succeeds.
func TestClassification(t *testing.T) {
	t.Parallel()
	v, u1 := newVespa(t)
	second := httptest.NewServer(v) // the same container's counts behind a second endpoint
	t.Cleanup(second.Close)
	for _, tc := range []struct {
		name     string
		requests int
		complete bool
		status   int // of a *StatusError; 0 for a result
		check    func(*Result) bool
	}{
		{"ok", 1, true, 0, func(r *Result) bool {
			return len(r.Hits) == 2 && r.TotalCount == 2 && r.Hits[0].ID == "id:music:music::1"
		}},
		{"errors", 1, false, 0, func(r *Result) bool { return len(r.Hits) == 1 && len(r.Errors) == 1 && r.Errors[0].Code == 12 }},
		{"degraded", 1, false, 0, func(r *Result) bool {
			return r.Coverage.Coverage == 50 && strings.Join(r.Coverage.Degraded.Reasons(), ",") == "timeout"
		}},
		{"illegal", 1, false, 400, nil},
		{"doomed", 1, false, 500, nil},
		{"html", 1, false, -1, nil},
		{"503", 2, true, 0, nil},
		{"504", 2, true, 0, nil},
		{"429", 2, true, 0, nil},
	} {
		// A client of its own: a 503 makes the endpoint that sent it
		// avoided for a second.
		c, err := New(Config{URLs: []string{u1, second.URL}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"select * from music where true"}, "case": {tc.name}}})
		var se *StatusError
		switch {
		case tc.status == 0 && (err != nil || res.Requests != tc.requests || res.Complete() != tc.complete || tc.check != nil && !tc.check(res)):
			t.Errorf("%s: %+v, %v; want a result after %d requests, complete %v", tc.name, res, err, tc.requests, tc.complete)
		case tc.status > 0 && (!errors.As(err, &se) || se.Status != tc.status || se.Requests != tc.requests || len(se.Errors) != 1):
			t.Errorf("%s: %v; want a %d after %d requests, with its error", tc.name, err, tc.status, tc.requests)
		case tc.status < 0 && !errors.Is(err, ErrNotJSON):
			t.Errorf("%s: %v; want ErrNotJSON", tc.name, err)
		}
		if got := v.asked[tc.name]; got != tc.requests {
			t.Errorf("%s: asked %d times, want %d", tc.name, got, tc.requests)
		}
		if res != nil && tc.requests == 2 && res.Endpoint == endpointOf(v, tc.name) {
			t.Errorf("%s: the retry went to the endpoint that answered 503", tc.name)
		}
	}
	c, err := New(Config{URLs: []string{u1}})
	if err != nil {
		t.Fatal(err)
	}
	var se *StatusError
	_, err = c.Search(t.Context(), Query{Params: url.Values{"case": {"doomed"}}})
	if !errors.As(err, &se) || !se.SoftDoomed() {
		t.Errorf("a soft doomed 500: %v, want SoftDoomed", err)
	}
}

// TestDeadlineTravels: a query's timeout is what is left of its deadline
// less the margin, in a GET's URL and in a POSTed body; a retry sends what
// is left then; with too little left, no request leaves and the error
// matches ErrNoTimeLeft and context.DeadlineExceeded; without a deadline
// no timeout is sent, and the query's own is kept when it is shorter.
func TestDeadlineTravels(t *testing.T) {
	t.Parallel()
	v, u := newVespa(t)
	c, err := New(Config{URLs: []string{u}, MinMargin: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ms := func(s string) int {
		var n int
		fmt.Sscanf(s, "%dms", &n)
		return n
	}
	for _, q := range []Query{{Params: url.Values{"case": {"ok"}}}, {Body: []byte(`{"yql":"select * from music where true","case":"ok"}`)}} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		if _, err := c.Search(ctx, q); err != nil {
			t.Fatal(err)
		}
		cancel()
		sent := ms(v.timeouts[len(v.timeouts)-1])
		if sent <= 0 || sent > 300-20 {
			t.Errorf("%+v: the timeout sent %q, want at most 280ms", q, v.timeouts[len(v.timeouts)-1])
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond) // less than the margin
	defer cancel()
	before := len(v.timeouts)
	if _, err := c.Search(ctx, Query{Params: url.Values{"case": {"ok"}}}); !errors.Is(err, ErrNoTimeLeft) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("10 ms left: %v, want ErrNoTimeLeft and DeadlineExceeded", err)
	}
	if len(v.timeouts) != before {
		t.Error("a request left with too little time for it")
	}
	if _, err := c.Search(t.Context(), Query{Params: url.Values{"case": {"ok"}}}); err != nil || v.timeouts[len(v.timeouts)-1] != "" {
		t.Errorf("no deadline: %v, timeout %q; want none sent", err, v.timeouts[len(v.timeouts)-1])
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Search(ctx, Query{Params: url.Values{"case": {"ok"}, "timeout": {"0.1"}}}); err != nil || v.timeouts[len(v.timeouts)-1] != "100ms" {
		t.Errorf("the query's own 0.1 s, 10 s left: %v, timeout %q; want 100ms", err, v.timeouts[len(v.timeouts)-1])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRetriesWithinTheDeadline, in fake time: a container that answers
// 503 after 30 ms is asked again while the 300 ms deadline allows a query
// (its median round trip), each retry with the time left then less the
// margin, and no retry starts after that; without a deadline, a container that never answers
// is given up on after the query's timeout and a second.
func TestRetriesWithinTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent []string
		var at []time.Duration
		start := time.Now()
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, Budget: retries.NewBudget(1, 100),
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = append(sent, r.URL.Query().Get("timeout"))
				at = append(at, time.Since(start))
				select {
				case <-time.After(30 * time.Millisecond):
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
				return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err = c.Search(ctx, Query{Params: url.Values{"yql": {"x"}}})
		var se *StatusError
		if !errors.As(err, &se) || se.Status != 503 || se.Requests != len(sent) || len(sent) < 2 {
			t.Fatalf("Search() = %v after %d requests (%v at %v); want the last 503 after retries", err, len(sent), sent, at)
		}
		for i, s := range sent {
			var ms int
			fmt.Sscanf(s, "%dms", &ms)
			if left := 300*time.Millisecond - at[i]; time.Duration(ms)*time.Millisecond > left-5*time.Millisecond || ms <= 0 {
				t.Errorf("request %d at %v sent timeout %s with %v left", i+1, at[i], s, left)
			}
		}
		t.Logf("timeouts %v sent at %v", sent, at)
		if last := at[len(at)-1]; last+30*time.Millisecond > 300*time.Millisecond {
			t.Errorf("the last retry started at %v, when less than a query's time was left", last)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{URLs: []string{"http://a"}, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		})})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Search(t.Context(), Query{Params: url.Values{"timeout": {"200ms"}}})
		if took := time.Since(start); err == nil || took != 1200*time.Millisecond {
			t.Errorf("a container that never answers, no deadline: %v after %v, want an error after 1.2 s", err, took)
		}
	})
}

// TestStats: a client counts its queries by how they ended: results,
// incomplete ones (errors or partial coverage), partial coverage by
// reason, and failures.
func TestStats(t *testing.T) {
	t.Parallel()
	_, u := newVespa(t)
	c, err := New(Config{URLs: []string{u}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ok", "errors", "degraded", "illegal", "ok"} {
		_, _ = c.Search(t.Context(), Query{Params: url.Values{"case": {kind}}})
	}
	s := c.Stats()
	if s.Queries != 5 || s.Requests != 5 || s.Results != 4 || s.Incomplete != 2 || s.Failed != 1 ||
		s.Degraded["timeout"] != 1 || s.Degraded["match-phase"] != 0 || len(s.Degraded) != 5 {
		t.Errorf("Stats() = %+v; want 5 queries, 4 results (2 incomplete, 1 with a timeout), 1 failed", s)
	}
}

// TestHTTP2: with Config.HTTP2 the queries go over HTTP/2 by prior
// knowledge to an http URL, all on one connection.
func TestHTTP2(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	protos, conns := map[int]int{}, map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.ProtoMajor]++
		conns[r.RemoteAddr] = true
		mu.Unlock()
		fmt.Fprint(w, okBody)
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Config{URLs: []string{srv.URL}, HTTP2: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if protos[2] != 10 || len(conns) != 1 {
		t.Errorf("protocols %v over %d connections, want 10 queries over HTTP/2 on one", protos, len(conns))
	}
}
