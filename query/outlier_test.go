package query

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestSlowEndpointEjected, in fake time: of three containers, c answers
// in 40 ms where a and b answer in 4 ms. Once the client has seen it, c is
// avoided, its queries going to a and b; 5 s later it is tried again, and
// avoided again while it stays slow; once it is fast again it takes its
// share. A container that refuses connections is avoided for a second.
func TestSlowEndpointEjected(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		served := map[string]int{}
		slow := true
		c, err := New(Config{URLs: []string{"http://a", "http://b", "http://c"}, NoHedge: true,
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				served[r.URL.Host]++
				d := 4 * time.Millisecond
				if r.URL.Host == "c" && slow {
					d = 40 * time.Millisecond
				}
				mu.Unlock()
				time.Sleep(d)
				return &http.Response{StatusCode: 200, Body: noBody(okBody), Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		search := func(n int) map[string]int {
			mu.Lock()
			clear(served)
			mu.Unlock()
			for range n {
				if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			return map[string]int{"a": served["a"], "b": served["b"], "c": served["c"]}
		}
		search(30) // each answers 10 times: c's average is 10 times the others'
		if got := search(30); got["c"] != 0 || got["a"] != 15 || got["b"] != 15 {
			t.Errorf("after c was seen slow: served %v, want c avoided, its queries shared", got)
		}
		time.Sleep(ejectFor)
		if got := search(60); got["c"] != minRoundTrips {
			t.Errorf("5 s later, c still slow: served %v, want c tried %d times and avoided again", got, minRoundTrips)
		}
		if s := c.Stats(); s.Ejected != 2 {
			t.Errorf("Stats().Ejected = %d, want 2", s.Ejected)
		}
		mu.Lock()
		slow = false
		mu.Unlock()
		time.Sleep(ejectFor)
		if got := search(30); got["c"] != 10 {
			t.Errorf("c fast again: served %v, want its share", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		served := map[string]int{}
		c, err := New(Config{URLs: []string{"http://a", "http://b"}, NoHedge: true, Budget: retries.NewBudget(1, 100),
			Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				served[r.URL.Host]++
				mu.Unlock()
				if r.URL.Host == "b" {
					return nil, errRefusedConn
				}
				return &http.Response{StatusCode: 200, Body: noBody(okBody), Header: http.Header{}}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if _, err := c.Search(t.Context(), Query{Params: url.Values{"yql": {"x"}}}); err != nil {
				t.Fatal(err)
			}
		}
		if served["b"] != 1 || served["a"] != 10 {
			t.Errorf("served %v: want b, which refuses connections, asked once and then avoided", served)
		}
	})
}

// errRefusedConn is what a dial to a port where nothing listens returns.
var errRefusedConn error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
