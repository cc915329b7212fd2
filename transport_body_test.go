package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestTransportReusesConnections is the leak test: 50 retried 429s through
// one client use one connection, because every retried response is drained
// and closed. With a discard step that leaves them open, every attempt needs
// a new connection: 51 here.
func TestTransportReusesConnections(t *testing.T) {
	const n = 50
	codes := make([]int, 0, n+1)
	for range n {
		codes = append(codes, http.StatusTooManyRequests)
	}
	codes = append(codes, http.StatusOK)

	for _, tc := range []struct {
		name       string
		leak       bool
		atMost     int64
		atLeast    int64
		wantStatus int
	}{
		{name: "drained", atMost: 3, atLeast: 1},
		{name: "not drained", leak: true, atMost: n + 1, atLeast: n - 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(codes...))
			p := retries.Throttle.Copy(tpNoWait)
			var kept []*http.Response
			if tc.leak {
				// A discard step that keeps the responses open (they are
				// closed at the end, so the test itself leaks nothing).
				p = p.Copy(retries.WithDiscard(func(v any) { kept = append(kept, v.(*http.Response)) }))
			}
			tracker := tpNewTracker(t)
			client := &http.Client{Transport: retries.NewTransport(tracker, p)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			tpRead(t, resp)
			for _, r := range kept {
				r.Body.Close()
			}
			if got := srv.requests.Load(); got != n+1 {
				t.Errorf("server saw %d requests, want %d", got, n+1)
			}
			if got := srv.newConns.Load(); got < tc.atLeast || got > tc.atMost {
				t.Errorf("server saw %d new connections, want %d to %d", got, tc.atLeast, tc.atMost)
			}
			t.Logf("%d requests over %d connections", srv.requests.Load(), srv.newConns.Load())
		})
	}
}

func TestTransportNonReplayableBody(t *testing.T) {
	const payload = "a body that can be read only once"
	// onceReader is an io.Reader that http.NewRequest cannot replay.
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name       string
		handler    func(http.ResponseWriter, *http.Request, int)
		dropGet    bool // build from a bytes.Reader, then remove GetBody
		wantStatus int  // 0: an error matching ErrBodyNotReplayable
		wantCode   int  // the StatusError in that error; 0: none
		wantConn   bool // the error is a connection error
	}{
		{name: "io.Reader body, 429", handler: tpStatuses(429), wantCode: 429},
		{name: "GetBody removed, 429", handler: tpStatuses(429), dropGet: true, wantCode: 429},
		{name: "dropped connection", handler: tpDropper(t, 100, ""), wantConn: true},
		{name: "success is returned", handler: tpStatuses(200), wantStatus: 200},
		{name: "status the policy does not retry", handler: tpStatuses(400), wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tc.handler)
			tracker := tpNewTracker(t)
			rt := retries.NewTransport(tracker, retries.SyncRequest.Copy(tpNoWait))
			var body io.Reader = onceReader{strings.NewReader(payload)}
			if tc.dropGet {
				body = strings.NewReader(payload)
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.dropGet {
				req.GetBody = nil
			}

			// Through a client, as IsConnectionError expects the errors of
			// an http.Client.
			resp, err := (&http.Client{Transport: rt}).Do(req)
			if got := srv.requests.Load(); got != 1 {
				t.Errorf("server saw %d requests, want 1", got)
			}
			if got := srv.gotBodies(); len(got) != 1 || got[0] != payload {
				t.Errorf("server got bodies %q, want one %q", got, payload)
			}
			if tc.wantStatus != 0 {
				if err != nil {
					t.Fatalf("RoundTrip() error = %v, want nil", err)
				}
				if resp.StatusCode != tc.wantStatus {
					t.Errorf("status = %d, want %d", resp.StatusCode, tc.wantStatus)
				}
				tpRead(t, resp)
				return
			}
			if resp != nil {
				t.Errorf("RoundTrip() returned a response with error %v", err)
			}
			if !errors.Is(err, retries.ErrBodyNotReplayable) {
				t.Fatalf("RoundTrip() error = %v, want one matching ErrBodyNotReplayable", err)
			}
			if !strings.Contains(err.Error(), "GetBody") {
				t.Errorf("error %q does not say why it was not retried", err)
			}
			var se *retries.StatusError
			if got := errors.As(err, &se); got != (tc.wantCode != 0) || got && se.StatusCode != tc.wantCode {
				t.Errorf("StatusError in %v: %v, want status %d", err, se, tc.wantCode)
			}
			if got := retries.IsConnectionError(err); got != tc.wantConn {
				t.Errorf("IsConnectionError(%v) = %v, want %v", err, got, tc.wantConn)
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}

	t.Run("two layers say it once", func(t *testing.T) {
		srv := tpServe(t, tpStatuses(429))
		inner := retries.NewTransport(tpNewTracker(t), retries.Throttle.Copy(tpNoWait))
		rt := retries.NewTransport(inner, retries.DocV1.Copy(tpNoWait))
		req, err := http.NewRequest(http.MethodPost, srv.URL, onceReader{strings.NewReader(payload)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.RoundTrip(req)
		if !errors.Is(err, retries.ErrBodyNotReplayable) {
			t.Fatalf("RoundTrip() error = %v, want one matching ErrBodyNotReplayable", err)
		}
		if n := strings.Count(err.Error(), "GetBody"); n != 1 {
			t.Errorf("error %q explains itself %d times, want once", err, n)
		}
		if got := srv.requests.Load(); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
	})
}

func TestTransportGetBodyFails(t *testing.T) {
	srv := tpServe(t, tpStatuses(429, 200))
	errGone := errors.New("the file is gone")
	req := tpPost(t, context.Background(), srv.URL, "doc")
	calls := 0
	req.GetBody = func() (io.ReadCloser, error) { // the first attempt sends req.Body
		calls++
		return nil, errGone
	}
	tracker := tpNewTracker(t)
	resp, err := retries.NewTransport(tracker, retries.Throttle.Copy(tpNoWait)).RoundTrip(req)
	if resp != nil || !errors.Is(err, errGone) {
		t.Fatalf("RoundTrip() = %v, %v, want nil and an error matching %v", resp, err, errGone)
	}
	if !strings.Contains(err.Error(), "GetBody") {
		t.Errorf("error %q does not name GetBody", err)
	}
	if got := srv.requests.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
	if calls != 1 {
		t.Errorf("GetBody called %d times, want 1 (for the retry, then given up)", calls)
	}
	if open := tracker.open.Load(); open != 0 {
		t.Errorf("%d response bodies left open, want 0", open)
	}
}

// TestTransportDiscardIsBounded sends a retried response whose body stalls
// after a few bytes: the discard step gives up on it after 100 ms, or after
// the attempt timeout when that is shorter, closes it, and the next attempt
// starts then. The caller's 3 s deadline is what it waited for before.
func TestTransportDiscardIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy retries.Policy
		code   int
		opts   []retries.TransportOption
		want   time.Duration
	}{
		{"503 with no attempt timeout", retries.DocV1, http.StatusServiceUnavailable, nil, 100 * time.Millisecond},
		{"429 with no attempt timeout", retries.Throttle, http.StatusTooManyRequests, nil, 100 * time.Millisecond},
		{"attempt timeout below the bound", retries.DocV1, http.StatusServiceUnavailable,
			[]retries.TransportOption{retries.WithAttemptTimeout(40 * time.Millisecond)}, 40 * time.Millisecond},
		{"attempt timeout above the bound", retries.DocV1, http.StatusServiceUnavailable,
			[]retries.TransportOption{retries.WithAttemptTimeout(200 * time.Millisecond)}, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				var stalled *tpStalledBody
				fake := tpNewFake(func(n int, req *http.Request) (*http.Response, error) {
					if n == 1 {
						stalled = tpNewStalledBody(req.Context(), "partial")
						return tpResponse(req, tc.code, stalled), nil
					}
					return tpResponse(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
				})
				rt := retries.NewTransport(fake, tc.policy.Copy(tpNoWait), tc.opts...)
				resp, err := rt.RoundTrip(tpPost(t, ctx, "http://example.test/doc", "doc"))
				if err != nil {
					t.Fatalf("RoundTrip() error = %v, want nil", err)
				}
				if got := tpRead(t, resp); got != "ok" {
					t.Errorf("body = %q, want ok", got)
				}
				if len(fake.calls) != 2 || fake.calls[1] != tc.want {
					t.Errorf("attempts at %v, want [0s %v]", fake.calls, tc.want)
				}
				if !stalled.isClosed() {
					t.Error("the stalled body was not closed")
				}
			})
		})
	}
}

// TestTransportDiscardIsBoundedOnGivingUp covers the response that RoundTrip
// discards itself: a Retry-After that would pass the deadline ends the call
// at once, and the stalled body of the last 429 does not delay that by more
// than the bound.
func TestTransportDiscardIsBoundedOnGivingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var stalled *tpStalledBody
		fake := tpNewFake(func(_ int, req *http.Request) (*http.Response, error) {
			stalled = tpNewStalledBody(req.Context(), "slow down")
			resp := tpResponse(req, http.StatusTooManyRequests, stalled)
			resp.Header.Set("Retry-After", "10")
			return resp, nil
		})
		p := retries.Throttle.Copy(retries.WithWait(retries.WaitRetryAfter(retries.Throttle.Wait(), time.Minute)))
		start := time.Now()
		resp, err := retries.NewTransport(fake, p).RoundTrip(tpPost(t, ctx, "http://example.test/doc", "doc"))
		if resp != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("RoundTrip() = %v, %v, want nil and an error matching DeadlineExceeded", resp, err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("RoundTrip() returned after %v, want 100ms", got)
		}
		if len(fake.calls) != 1 || !stalled.isClosed() {
			t.Errorf("%d attempts, body closed %v; want 1 and true", len(fake.calls), stalled.isClosed())
		}
	})
}

// tpStallServer starts a loopback server, HTTP/2 over TLS when h2 is set,
// whose first answer is a 503 header and a few bytes of body, after which it
// stalls until the client goes away; later answers are "ok".
func tpStallServer(t *testing.T, h2 bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if requests.Add(1) > 1 {
			fmt.Fprint(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first, so Close need not wait
	return srv, &requests
}

// TestTransportDiscardsStalledBodyOverNetwork checks, against real stalled
// servers over HTTP/1 and HTTP/2, that closing a body unblocks net/http's
// pending read, so the discard step's bound holds and leaks no goroutine.
func TestTransportDiscardsStalledBodyOverNetwork(t *testing.T) {
	for _, tc := range []struct {
		name string
		h2   bool
		opts []retries.TransportOption
	}{
		{"HTTP/1", false, nil},
		{"HTTP/1 with attempt timeout", false, []retries.TransportOption{retries.WithAttemptTimeout(200 * time.Millisecond)}},
		{"HTTP/2", true, nil},
		{"HTTP/2 with attempt timeout", true, []retries.TransportOption{retries.WithAttemptTimeout(200 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			srv, requests := tpStallServer(t, tc.h2)
			base := srv.Client().Transport.(*http.Transport)
			rt := retries.NewTransport(base, retries.DocV1.Copy(tpNoWait), tc.opts...)

			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				resp, err := rt.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
				done <- result{resp, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("RoundTrip() still blocked on the stalled body after 10s")
			}
			elapsed := time.Since(start)
			if res.err != nil {
				t.Fatalf("RoundTrip() error = %v, want nil", res.err)
			}
			if got := tpRead(t, res.resp); got != "ok" {
				t.Errorf("body = %q, want ok", got)
			}
			if wantMajor := map[bool]int{false: 1, true: 2}[tc.h2]; res.resp.ProtoMajor != wantMajor {
				t.Errorf("protocol %s, want HTTP/%d", res.resp.Proto, wantMajor)
			}
			if got := requests.Load(); got != 2 {
				t.Errorf("server saw %d requests, want 2", got)
			}
			// The bound is 100 ms; the margin is for a loaded machine.
			if elapsed > 2*time.Second {
				t.Errorf("RoundTrip() took %v, want about 100ms", elapsed)
			}
			t.Logf("RoundTrip() took %v", elapsed)
			base.CloseIdleConnections()
			srv.Close()
			tpSettleGoroutines(t, goroutines)
		})
	}
}
