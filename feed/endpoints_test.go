package feed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// endpointPair starts two endpoints whose answers are recorded, in the order
// given across both, in log: "METHOD path" of each request answered 200.
type endpointPair struct {
	a, b   *feedtest.Server
	errOut io.Writer // the feed's Log, if not nil
	mu     sync.Mutex
	log    []string
}

func newEndpointPair(t *testing.T, fault func(which string, r *http.Request) int) *endpointPair {
	t.Helper()
	p := &endpointPair{}
	record := func(which string) func(*http.Request, int) int {
		return func(r *http.Request, _ int) int {
			code := 0
			if fault != nil {
				code = fault(which, r)
			}
			if code == 0 {
				p.mu.Lock()
				p.log = append(p.log, r.Method+" "+r.URL.Path)
				p.mu.Unlock()
			}
			return code
		}
	}
	p.a, p.b = feedtest.New(t, record("a")), feedtest.New(t, record("b"))
	return p
}

// feedAll feeds opsInput(n) to both endpoints, with probeEvery as their
// breakers' MaxProbeInterval (0: the default), and checks that the feed
// completes with every operation answered in input order. It returns the
// summary and stderr.
func (p *endpointPair) feedAll(t *testing.T, n int, probeEvery time.Duration) (map[string]any, string) {
	t.Helper()
	cfg := testFeedConfig("", p.errOut)
	cfg.URLs = []string{p.a.URL, p.b.URL}
	cfg.MaxProbeInterval = probeEvery
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, opsInput(n))
	if !res.Complete() {
		t.Fatalf("incomplete; stderr:\n%s", stderr)
	}
	checkAllInOrder(t, p.log, n)
	return sum, stderr
}

// opsInput returns n documents, each put, updated and removed.
func opsInput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"put":"id:ns:d::%d","fields":{}}`+"\n", i)
		fmt.Fprintf(&b, `{"update":"id:ns:d::%d","fields":{"x":{"assign":1}}}`+"\n", i)
		fmt.Fprintf(&b, `{"remove":"id:ns:d::%d"}`+"\n", i)
	}
	return b.String()
}

// checkAllInOrder checks that log holds every operation of opsInput(n)
// answered 200 at least once, in input order per document.
func checkAllInOrder(t *testing.T, log []string, n int) {
	t.Helper()
	byDoc := map[string][]string{}
	for _, l := range log {
		method, path, _ := strings.Cut(l, " ")
		doc := path[strings.LastIndexByte(path, '/')+1:]
		if q := byDoc[doc]; len(q) == 0 || q[len(q)-1] != method {
			byDoc[doc] = append(q, method) // a repeat of an operation counts once
		}
	}
	for i := range n {
		if got := byDoc[fmt.Sprint(i)]; !slices.Equal(got, []string{"POST", "PUT", "DELETE"}) {
			t.Errorf("document %d: %v, want POST, PUT, DELETE", i, got)
		}
	}
}

// TestFeedEndpointsShare: two healthy endpoints share the operations, each
// in input order per document whichever endpoint takes it.
func TestFeedEndpointsShare(t *testing.T) {
	t.Parallel()
	p := newEndpointPair(t, nil)
	sum, _ := p.feedAll(t, 200, 0)
	na, nb := len(p.a.Applied()), len(p.b.Applied())
	if na < 60 || nb < 60 {
		t.Errorf("endpoints took %d and %d of 600 operations, want a share each", na, nb)
	}
	eps, _ := sum["retries.endpoints"].([]any)
	if len(eps) != 2 {
		t.Errorf("summary endpoints = %v, want two", sum["retries.endpoints"])
	}
}

// TestFeedEndpointFails: one of two endpoints stops listening for good
// mid-feed; its share moves to the other and no operation is lost or
// reordered.
func TestFeedEndpointFails(t *testing.T) {
	t.Parallel()
	var once sync.Once
	var p *endpointPair
	p = newEndpointPair(t, func(which string, r *http.Request) int {
		if which == "b" && len(p.b.Applied()) >= 50 {
			once.Do(func() { go p.b.Down() })
		}
		return 0
	})
	sum, stderr := p.feedAll(t, 200, 20*time.Millisecond)
	if !strings.Contains(stderr, "retries feed: endpoint "+p.b.URL+" is failing (") {
		t.Errorf("stderr does not name the failing endpoint:\n%s", stderr)
	}
	if strings.Contains(stderr, "paused") {
		t.Errorf("the feed paused while an endpoint answered:\n%s", stderr)
	}
	eps, _ := sum["retries.endpoints"].([]any)
	if len(eps) == 2 {
		if b := eps[1].(map[string]any)["breaker"].(map[string]any); b["opened"].(float64) < 1 {
			t.Errorf("endpoint b's breaker = %v, want opened", b)
		}
	}
}

// TestFeedEndpointsBothFail: both endpoints fail for 300 ms: the feed
// pauses, resumes, and loses nothing.
func TestFeedEndpointsBothFail(t *testing.T) {
	t.Parallel()
	// The outage lasts until the feed has paused, however long the
	// breakers take on a loaded machine.
	w := newSignalWriter("retries feed: paused: every endpoint is failing (")
	var mu sync.Mutex
	begun := false
	var p *endpointPair
	p = newEndpointPair(t, func(which string, r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if !begun && len(p.a.Applied())+len(p.b.Applied()) >= 150 {
			begun = true
		}
		if begun && !w.seen() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	p.errOut = w
	p.feedAll(t, 200, 20*time.Millisecond)
	if !strings.Contains(w.String(), "retries feed: resumed: ") {
		t.Errorf("stderr does not say the feed resumed:\n%s", w)
	}
}

// TestFeedEndpointMovesOnlyUnsent: when one of two endpoints fails, the
// operations waiting on it move to the other, but those whose request is
// on the wire stay until their answer. Endpoint a holds its first requests
// until its breaker has opened (it sheds the rest with 503s), then answers
// them: every increment is applied exactly once, and the feed completes.
func TestFeedEndpointMovesOnlyUnsent(t *testing.T) {
	t.Parallel()
	const n, held = 200, 4
	var w *signalWriter // set once a's URL is known
	var mu sync.Mutex
	holding := 0
	p := newEndpointPair(t, func(which string, r *http.Request) int {
		if which != "a" {
			return 0
		}
		mu.Lock()
		hold := holding < held
		holding++
		mu.Unlock()
		if !hold {
			if w.seen() {
				return 0
			}
			return http.StatusServiceUnavailable
		}
		select {
		case <-w.found:
		case <-time.After(10 * time.Second):
			t.Errorf("endpoint a's breaker did not open")
		}
		return 0
	})
	w = newSignalWriter("retries feed: endpoint " + p.a.URL + " is failing (")
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"update":"id:ns:d::%d","fields":{"n":{"increment":1}}}`+"\n", i)
	}
	cfg := testFeedConfig("", w)
	cfg.URLs = []string{p.a.URL, p.b.URL}
	cfg.MaxProbeInterval = 20 * time.Millisecond
	cfg.Concurrency = 64 // no limiter: the held requests would hold a's permits, and its 503s would wait for them
	cfg.NoBudget = true  // a's 503s must not exhaust the budget before its breaker opens
	cfg.Outer = cfg.Outer.Copy(retries.WithStop(retries.StopAfterAttempt(100)))
	res, _, _ := runTestFeed(t, context.Background(), cfg, in.String())
	if !res.Complete() {
		t.Errorf("incomplete; stderr:\n%s", w.String())
	}
	if !w.seen() {
		t.Fatalf("endpoint a never failed; stderr:\n%s", w.String())
	}
	applied := map[string]int{}
	for _, s := range append(p.a.Applied(), p.b.Applied()...) {
		path, _, _ := strings.Cut(strings.TrimPrefix(s, "PUT "), " ")
		applied[path]++
	}
	for i := range n {
		if path := fmt.Sprintf("/document/v1/ns/d/docid/%d", i); applied[path] != 1 {
			t.Errorf("%s applied %d times, want once", path, applied[path])
		}
	}
}

// TestFeedEndpointFailsBeforeBreaker: an operation can use up its attempts
// on an endpoint before that endpoint's breaker has seen enough failures
// to open (it refuses each connection at once, or sheds with 503s, and the
// attempts do not wait). Nothing of it was applied, so it goes to the other
// endpoint rather than fail. With a fixed concurrency of 2, one or two
// operations at a time meet the failing endpoint.
func TestFeedEndpointFailsBeforeBreaker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(b *feedtest.Server) int // b's answer once it has applied 10
	}{
		// The request that brings b down is one of the first puts, safe
		// to repeat, whose connection closes under it.
		{"refused", func(b *feedtest.Server) int { b.Down(); return 0 }},
		{"503", func(*feedtest.Server) int { return http.StatusServiceUnavailable }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			failing := false
			var p *endpointPair
			p = newEndpointPair(t, func(which string, r *http.Request) int {
				mu.Lock()
				defer mu.Unlock()
				if which != "b" || !failing && len(p.b.Applied()) < 10 {
					return 0
				}
				failing = true
				return tc.fail(p.b)
			})
			cfg := testFeedConfig("", nil)
			cfg.URLs = []string{p.a.URL, p.b.URL}
			cfg.Concurrency = 2
			const n = 100
			// Each document is put, updated and removed, and each of n
			// others is incremented (an update not safe to repeat).
			var in strings.Builder
			in.WriteString(opsInput(n))
			for i := range n {
				fmt.Fprintf(&in, `{"update":"id:ns:i::inc%d","fields":{"n":{"increment":1}}}`+"\n", i)
			}
			res, _, stderr := runTestFeed(t, context.Background(), cfg, in.String())
			if !res.Complete() {
				t.Fatalf("incomplete; stderr:\n%s", stderr)
			}
			checkAllInOrder(t, p.log, n)
			applied := map[string]int{}
			for _, s := range append(p.a.Applied(), p.b.Applied()...) {
				if path, ok := strings.CutPrefix(s, "PUT /document/v1/ns/i/docid/"); ok {
					id, _, _ := strings.Cut(path, " ")
					applied[id]++
				}
			}
			for i := range n {
				if id := fmt.Sprintf("inc%d", i); applied[id] != 1 {
					t.Errorf("%s incremented %d times, want once", id, applied[id])
				}
			}
		})
	}
}

// TestClientEndpoints: Endpoints gives each endpoint's URL without its
// password, and the limiter and breaker that paced its requests (no
// limiter with a fixed concurrency).
func TestClientEndpoints(t *testing.T) {
	t.Parallel()
	a, b := feedtest.New(t, nil), feedtest.New(t, nil)
	withPassword := strings.Replace(b.URL, "http://", "http://u:secret@", 1)
	cfg := testFeedConfig("", nil)
	cfg.URL, cfg.URLs = "", []string{a.URL, withPassword}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Feed(context.Background(), Read(strings.NewReader(puts(100))), nil); err != nil {
		t.Fatal(err)
	}
	eps := c.Endpoints()
	if len(eps) != 2 || eps[0].URL != a.URL || strings.Contains(eps[1].URL, "secret") {
		t.Fatalf("Endpoints() = %+v, want %s and %s without its password", eps, a.URL, b.URL)
	}
	var ok int64
	for _, e := range eps {
		if e.Limiter == nil || e.Breaker == nil {
			t.Fatalf("Endpoints() = %+v: want a limiter and a breaker each", eps)
		}
		ok += e.Breaker.Stats().Successes
	}
	if ok != 100 {
		t.Errorf("the breakers judged %d successes, want the 100 puts", ok)
	}
	cfg.Concurrency = 4
	fixed, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if l := fixed.Endpoints()[0].Limiter; l != nil {
		t.Errorf("with a fixed concurrency, Endpoints()[0].Limiter = %v, want nil", l)
	}
}
