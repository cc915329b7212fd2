package query

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// cluster is two containers in fake time: a answers in 4 ms and b in 2 ms
// (so that the 95th percentile is 4 ms, and a's ordinary answers tie with
// the hedge's timer, as in life some do), but a holds a query marked slow
// for 200 ms, and answers 503 to one marked busy. It records each request,
// and whether it was canceled.
type cluster struct {
	mu       sync.Mutex
	sent     []string // "a" or "b", in order
	canceled int
}

func (cl *cluster) RoundTrip(r *http.Request) (*http.Response, error) {
	host := r.URL.Host
	cl.mu.Lock()
	cl.sent = append(cl.sent, host)
	cl.mu.Unlock()
	d := 4 * time.Millisecond
	if host == "b" {
		d = 2 * time.Millisecond
	}
	q := r.URL.Query()
	if host == "a" && q.Get("slow") != "" {
		d = 200 * time.Millisecond
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		cl.mu.Lock()
		cl.canceled++
		cl.mu.Unlock()
		return nil, r.Context().Err()
	}
	if host == "a" && q.Get("busy") != "" {
		return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
	}
	return &http.Response{StatusCode: 200, Body: noBody(okBody), Header: http.Header{}}, nil
}

func (cl *cluster) canceledCount() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.canceled
}

// warm sends n queries, for the client to learn the round trip.
func warm(t *testing.T, c *Client, n int) {
	t.Helper()
	for range n {
		if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// slowFromA sends a query marked slow (and busy, if busy) whose first
// request goes to container a.
func slowFromA(t *testing.T, c *Client, busy bool) (*Result, time.Duration, error) {
	t.Helper()
	if c.next.Load()%2 != 0 {
		c.next.Add(1)
	}
	p := url.Values{"yql": {"x"}, "slow": {"1"}}
	if busy {
		p.Set("busy", "1")
	}
	start := time.Now()
	res, err := c.Search(t.Context(), Query{Params: p})
	return res, time.Since(start), err
}

// TestHedge, in fake time: once the round trip is known (its 95th
// percentile 4 ms), a query that container a holds is sent to container b
// after 4 ms, and b's answer is taken at 6 ms while a's request is
// canceled; with no budget, or hedging off, the query waits for a's
// 200 ms; after a 503, hedging pauses for a second.
func TestHedge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cl := &cluster{}
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, Transport: cl, Budget: retries.NewBudget(1, 100)})
		if err != nil {
			t.Fatal(err)
		}
		warm(t, c, 40)
		before, canceled := c.Stats(), cl.canceledCount()
		res, took, err := slowFromA(t, c, false)
		if err != nil || !res.Hedged || res.Endpoint != "http://b" || res.Requests != 2 || took != 6*time.Millisecond {
			t.Fatalf("a held query: %+v, %v after %v; want b's hedge after 6 ms", res, err, took)
		}
		synctest.Wait()
		if s := c.Stats(); cl.canceledCount() != canceled+1 || s.Hedges != before.Hedges+1 || s.HedgesWon != before.HedgesWon+1 {
			t.Errorf("%d canceled, %+v (before %+v); want a's request canceled, one hedge sent and won", cl.canceledCount(), s, before)
		}
	})
	for _, cfg := range []Config{{Budget: retries.NewBudget(0, 0)}, {NoHedge: true, Budget: retries.NewBudget(1, 100)}} {
		synctest.Test(t, func(t *testing.T) {
			cl := &cluster{}
			cfg.URLs, cfg.Transport = []string{"http://a", "http://b"}, cl
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			warm(t, c, 40)
			res, took, err := slowFromA(t, c, false)
			if err != nil || res.Hedged || res.Requests != 1 || took != 200*time.Millisecond || c.Stats().Hedges != 0 {
				t.Errorf("NoHedge %v: %+v, %v after %v, %+v; want a's answer after 200 ms, no hedge ever", cfg.NoHedge, res, err, took, c.Stats())
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		cl := &cluster{}
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, Transport: cl, Budget: retries.NewBudget(1, 100)})
		if err != nil {
			t.Fatal(err)
		}
		warm(t, c, 40)
		// a answers 503 at once here (busy, not slow: the 503 comes after
		// 4 ms), and the query goes on to b as a retry.
		if c.next.Load()%2 != 0 {
			c.next.Add(1)
		}
		if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}, "busy": {"1"}}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		hedges := c.Stats().Hedges
		// a, which answered 503, is avoided: the query goes to b, and is
		// not hedged (hedging is paused).
		res, took, err := slowFromA(t, c, false)
		if err != nil || res.Hedged || res.Endpoint != "http://b" || took != 2*time.Millisecond || c.Stats().Hedges != hedges {
			t.Errorf("right after a 503: %+v, %v after %v; want b's answer, no hedge", res, err, took)
		}
		time.Sleep(time.Second)
		if res, _, err := slowFromA(t, c, false); err != nil || !res.Hedged {
			t.Errorf("a second after the 503: %+v, %v; want hedging again", res, err)
		}
	})
}

// noBody returns s as a response body.
func noBody(s string) *readCloser { return &readCloser{strings.NewReader(s)} }

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// TestNoRetryIntoOverload, in fake time: when every endpoint answers 503,
// the first query asks each once, and the next ones, every endpoint then
// avoided, one request each: a retry would only add to the overload (the
// arena's 3 containers of 4 slots, offered 800 queries a second, got 5 %
// more requests than queries when a 503 was retried within the budget).
// A second later an endpoint is asked again as before.
func TestNoRetryIntoOverload(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var requests int
		c, err := New(Config{URLs: []string{"http://a", "http://b", "http://c"}, Budget: retries.NewBudget(1, 100),
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				requests++
				return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for range 4 {
			before := requests
			_, _ = c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}})
			got = append(got, requests-before)
		}
		if want := []int{3, 1, 1, 1}; !slices.Equal(got, want) {
			t.Errorf("requests per query %v, want %v", got, want)
		}
		time.Sleep(time.Second + time.Millisecond)
		before := requests
		_, _ = c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}})
		if requests-before != 3 {
			t.Errorf("a second later: %d requests, want each endpoint asked again", requests-before)
		}
	})
}
