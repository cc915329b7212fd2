package query

import (
	"context"
	"errors"
	"io"
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

// connServer is a container behind a load balancer's one URL, as each
// connection sees it: the bad connections (a container that answers 503,
// or never answers) and the others, which answer results. Unless told
// which are bad, the first connection it sees is.
type connServer struct {
	mu    sync.Mutex
	bad   map[string]bool // the bad connections' remote addresses; nil: the first seen
	hang  bool            // the bad connections never answer, rather than 503
	conns map[string]int
}

func (s *connServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.bad == nil {
		s.bad = map[string]bool{r.RemoteAddr: true}
	}
	s.conns[r.RemoteAddr]++
	bad := s.bad[r.RemoteAddr]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case bad && s.hang:
		<-r.Context().Done()
	case bad:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(noThreadBody))
	default:
		_, _ = w.Write([]byte(okBody))
	}
}

// TestOneURL: with one URL, as a load balancer gives, a query answered
// 503 is asked again on another connection (which the balancer may send
// to another container), and one left unanswered is hedged on another
// connection; both succeed. Before, a single URL was neither retried nor
// hedged.
func TestOneURL(t *testing.T) {
	t.Parallel()
	for _, hang := range []bool{false, true} {
		s := &connServer{hang: hang, conns: map[string]int{}}
		srv := httptest.NewServer(s)
		c, err := New(Config{URLs: []string{srv.URL}, Budget: retries.NewBudget(0.5, 10)})
		if err != nil {
			t.Fatal(err)
		}
		if hang {
			// The round trips the hedge's delay is learned from, on one
			// connection of a container that answers them.
			s.mu.Lock()
			s.bad = map[string]bool{}
			s.mu.Unlock()
			for range 40 {
				if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}}); err != nil {
					t.Fatal(err)
				}
			}
			// The connections the warm-up made now hang: the next query's
			// first request takes one of the primary pool's; its hedge one
			// of its own, new (the warm-up's hedges' are closed).
			s.mu.Lock()
			for addr := range s.conns {
				s.bad[addr] = true
			}
			s.conns = map[string]int{}
			s.mu.Unlock()
			c.spare.CloseIdleConnections()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		res, err := c.Search(ctx, Query{Params: url.Values{"yql": {"x"}}})
		cancel()
		if err != nil || res.Requests != 2 || res.Hedged != hang {
			t.Errorf("hang %v: Search() = %+v, %v; want a result on the second request (hedged %v)", hang, res, err, hang)
		}
		s.mu.Lock()
		if len(s.conns) < 2 {
			t.Errorf("hang %v: the requests came on %d connection(s), want another for the second", hang, len(s.conns))
		}
		s.mu.Unlock()
		c.Close()
		srv.Close()
	}
}

// TestBusyReturnsAtOnce, in fake time: a 503 that is not asked again
// comes back as it arrives, not after a retry's wait for nothing: with two
// endpoints, once both are avoided after their 503s (the second after
// the one wait of its retry); with one URL, when the budget allows no
// retry.
func TestBusyReturnsAtOnce(t *testing.T) {
	t.Parallel()
	busy := roundTripFunc(func(*http.Request) (*http.Response, error) {
		time.Sleep(5 * time.Millisecond)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(noThreadBody))}, nil
	})
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, NoHedge: true, Transport: busy})
		if err != nil {
			t.Fatal(err)
		}
		var waits []time.Duration
		c.policy = c.policy.Copy(retries.WithBeforeSleep(func(_ context.Context, s retries.State) { waits = append(waits, s.Wait) }))
		start := time.Now()
		_, err = c.Search(t.Context(), Query{})
		var se *StatusError
		if took := time.Since(start); !errors.As(err, &se) || se.Status != 503 || se.Requests != 2 || len(waits) != 1 || took != 10*time.Millisecond+waits[0] {
			t.Errorf("two endpoints: Search() = %v after %v, waits %v; want the second endpoint's 503 after one wait and 10 ms", err, took, waits)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{URLs: []string{"http://lb"}, NoHedge: true, Transport: busy, Budget: retries.NewBudget(0.01, 0)})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Search(t.Context(), Query{})
		var se *StatusError
		if took := time.Since(start); !errors.As(err, &se) || se.Status != 503 || se.Requests != 1 || took != 5*time.Millisecond {
			t.Errorf("one URL, no budget: Search() = %v after %v; want its 503 after its 5 ms", err, took)
		}
	})
}

// TestNewRefusesSearchPath: a URL that ends with /search/ (each query's
// path adds it) is refused by New, naming the root to give; before, every
// query went to /search/search/ and was answered 404.
func TestNewRefusesSearchPath(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://h:8080/search/", "http://h:8080/search", "https://gw/vespa/search/"} {
		if _, err := New(Config{URLs: []string{u}}); err == nil || !strings.Contains(err.Error(), "ends with /search/") {
			t.Errorf("New(%q) = %v, want it refused", u, err)
		}
	}
	for _, u := range []string{"http://h:8080", "http://h:8080/", "https://gw/vespa/"} {
		if _, err := New(Config{URLs: []string{u}}); err != nil {
			t.Errorf("New(%q) = %v, want it taken", u, err)
		}
	}
}
