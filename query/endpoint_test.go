package query

import (
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestFailingEndpointRoutedAround, in fake time: of three containers, c
// answers 500 to every query (a broken container, or a proxy before a dead
// one), a 500 that is not asked again. Without its breaker a third of the
// queries would fail for as long as it lasts; with it, c's breaker opens
// at the fifth failure, and then c's queries go to a and b in one request
// each, and c gets only the breaker's probes (100 ms apart after a 5xx),
// each asked again elsewhere: the 500 is then c's, not the query's. Once c
// answers again, a probe closes its breaker and c takes its share.
func TestFailingEndpointRoutedAround(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		served := map[string]int{}
		broken := true
		c, err := New(Config{URLs: []string{"http://a", "http://b", "http://c"}, NoHedge: true, Budget: retries.NewBudget(1, 100),
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				served[r.URL.Host]++
				if r.URL.Host == "c" && broken {
					return &http.Response{StatusCode: 500, Body: noBody(`{"root":{"errors":[{"code":8,"message":"internal"}]}}`), Header: http.Header{}}, nil
				}
				return &http.Response{StatusCode: 200, Body: noBody(okBody), Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		// search sends n queries 10 ms apart, and returns how many failed
		// with c's 500, what each container served, and the most requests
		// and the longest time a query took.
		var slowest time.Duration
		search := func(n int) (failed int, got map[string]int, most int) {
			mu.Lock()
			clear(served)
			mu.Unlock()
			for range n {
				start := time.Now()
				res, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}})
				slowest = max(slowest, time.Since(start))
				var se *StatusError
				switch {
				case errors.As(err, &se) && se.Status == 500 && se.Endpoint == "http://c":
					failed++
					most = max(most, se.Requests)
				case err != nil:
					t.Fatal(err)
				default:
					most = max(most, res.Requests)
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			return failed, map[string]int{"a": served["a"], "b": served["b"], "c": served["c"]}, most
		}
		// 300 queries over 3.6 s: 4 fail, the fifth opens the breaker and
		// goes to another container; then a probe at most every 100 ms
		// after a 5xx (the first 50 ms after), asked again elsewhere.
		start := time.Now()
		failed, got, most := search(300)
		probes := got["c"] - 5
		if failed != 4 || probes < 1 || probes > 1+int(time.Since(start)/(100*time.Millisecond)) {
			t.Errorf("c broken: %d queries failed, c served %d; want 4 failed, and after the fifth a probe each 100 ms at most", failed, got["c"])
		}
		if total := got["a"] + got["b"] + got["c"]; most != 2 || total != 300+1+probes {
			t.Errorf("c broken: %d requests, a query took %d at most; want 2 for the fifth failure and each probe, 1 for every other query (those c's breaker refused included): %d", total, most, 300+1+probes)
		}
		if s := c.Stats(); s.Retries != int64(1+probes) || s.Requests != int64(300+1+probes) {
			t.Errorf("Stats: %d requests, %d retries; want %d and %d", s.Requests, s.Retries, 300+1+probes, 1+probes)
		}
		if slowest != 4*time.Millisecond {
			t.Errorf("c broken: the slowest query took %v, want 4 ms: a failed probe asked again elsewhere at once", slowest)
		}
		if s := c.Stats().Endpoints[2]; s.Breaker.State == retries.BreakerClosed || s.Breaker.Opened != 1 {
			t.Errorf("c's breaker: %+v, want open, once", s.Breaker)
		}
		mu.Lock()
		broken = false
		mu.Unlock()
		time.Sleep(time.Second)
		if failed, got, _ := search(30); failed != 0 || got["c"] != 10 {
			t.Errorf("c answers again: %d failed, served %v; want c's share (10), none failed", failed, got)
		}
		if s := c.Stats().Endpoints[2]; s.Breaker.State != retries.BreakerClosed {
			t.Errorf("c's breaker: %v, want closed", s.Breaker.State)
		}
	})
}

// TestEveryEndpointDown, in fake time: when every container refuses
// connections, each is asked until its breaker opens, and then a query
// fails at once, with no request, saying so; a probe goes now and then,
// and once a container answers, the queries go to it.
func TestEveryEndpointDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		requests, down := 0, true
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, NoHedge: true,
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				requests++
				if down {
					return nil, errRefusedConn
				}
				return &http.Response{StatusCode: 200, Body: noBody(okBody), Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		search := func() error {
			_, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}})
			return err
		}
		for range 20 {
			if err := search(); !retries.IsConnectionError(err) && !errors.Is(err, retries.ErrBreakerOpen) {
				t.Fatalf("Search: %v, want a connection error or every breaker open", err)
			}
		}
		for _, e := range c.Stats().Endpoints {
			if e.Breaker.State == retries.BreakerClosed {
				t.Fatalf("%s: breaker closed after 20 queries refused", e.URL)
			}
		}
		mu.Lock()
		before := requests
		mu.Unlock()
		start := time.Now()
		err = search()
		if !errors.Is(err, retries.ErrBreakerOpen) || time.Since(start) != 0 {
			t.Errorf("every breaker open: Search: %v after %v, want ErrBreakerOpen at once", err, time.Since(start))
		}
		if want := "query: every endpoint is failing: their circuit breakers are open"; err == nil || err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		mu.Lock()
		if requests != before {
			t.Errorf("every breaker open: %d requests sent, want none", requests-before)
		}
		down = false
		mu.Unlock()
		time.Sleep(time.Second)
		if err := search(); err != nil {
			t.Errorf("a second after the containers came back: %v", err)
		}
	})
}

// TestNeutralAnswersKeepTheBreakerClosed: answers that say nothing of
// whether a container works (a 503, a 429, a 504, a soft doomed 500) do
// not open its breaker, however many; a 502 does.
func TestNeutralAnswersKeepTheBreakerClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		opens  bool
	}{
		{503, "", false},
		{429, "", false},
		{504, `{"root":{"errors":[{"code":12,"message":"Timed out"}]}}`, false},
		{500, `{"root":{"errors":[{"code":12,"summary":"Timed out","message":"Query soft doomed during query setup"}]}}`, false},
		{500, `{"root":{"errors":[{"code":8,"message":"internal server error"}]}}`, true},
		{502, "", true},
	} {
		synctest.Test(t, func(t *testing.T) {
			c, err := New(Config{URLs: []string{"http://a"}, NoHedge: true,
				Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: tc.status, Body: noBody(tc.body), Header: http.Header{}}, nil
				})})
			if err != nil {
				t.Fatal(err)
			}
			for range 40 {
				_, _ = c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}})
				time.Sleep(10 * time.Millisecond)
			}
			if opened := c.Stats().Endpoints[0].Breaker.Opened > 0; opened != tc.opens {
				t.Errorf("40 × %d %s: breaker opened %v, want %v", tc.status, tc.body, opened, tc.opens)
			}
		})
	}
}
