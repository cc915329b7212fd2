package feed

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries/cmd/retries/internal/feedtest"
)

// endpointPair starts two endpoints whose answers are recorded, in the order
// given across both, in log: "METHOD path" of each request answered 200.
type endpointPair struct {
	a, b *feedtest.Server
	mu   sync.Mutex
	log  []string
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
	cfg := testFeedConfig("", nil)
	cfg.URLs = []string{p.a.URL, p.b.URL}
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, opsInput(200))
	if !res.Complete() {
		t.Fatalf("incomplete; stderr:\n%s", stderr)
	}
	checkAllInOrder(t, p.log, 200)
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
	cfg := testFeedConfig("", nil)
	cfg.URLs = []string{p.a.URL, p.b.URL}
	cfg.MaxProbeInterval = 20 * time.Millisecond
	res, sum, stderr := runTestFeed(t, context.Background(), cfg, opsInput(200))
	if !res.Complete() {
		t.Fatalf("incomplete; stderr:\n%s", stderr)
	}
	checkAllInOrder(t, p.log, 200)
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
	var mu sync.Mutex
	var until time.Time
	var p *endpointPair
	p = newEndpointPair(t, func(which string, r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if until.IsZero() && len(p.a.Applied())+len(p.b.Applied()) >= 150 {
			until = time.Now().Add(300 * time.Millisecond)
		}
		if !until.IsZero() && time.Now().Before(until) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	cfg := testFeedConfig("", nil)
	cfg.URLs = []string{p.a.URL, p.b.URL}
	cfg.MaxProbeInterval = 20 * time.Millisecond
	res, _, stderr := runTestFeed(t, context.Background(), cfg, opsInput(200))
	if !res.Complete() {
		t.Fatalf("incomplete; stderr:\n%s", stderr)
	}
	checkAllInOrder(t, p.log, 200)
	for _, w := range []string{"retries feed: paused: every endpoint is failing (", "retries feed: resumed: "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
}
