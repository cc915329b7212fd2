package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

func TestTransportErrorsLeakNothing(t *testing.T) {
	const (
		password = "s3cret-pass"
		token    = "s3cret-token"
		body     = "s3cret-body"
	)
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name    string
		addr    func(t *testing.T) string
		policy  retries.Policy
		once    bool // a body that cannot be replayed
		cancel  bool // the context is canceled before the call
		timeout time.Duration
		layers  bool // the policy around a Throttle Transport

		attemptErrs bool // attempts fail with errors, which hooks see
	}{
		{name: "connection refused, last error", addr: refused, policy: retries.DocV1, attemptErrs: true},
		{name: "connection refused, RetryError", addr: refused, policy: retries.Query, attemptErrs: true},
		{name: "connection refused, two layers", addr: refused, policy: retries.DocV1, layers: true, attemptErrs: true},
		{name: "giving up on 503, two layers", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(503)).Listener.Addr().String()
		}, policy: retries.Query.Copy(retries.WithRetry(retries.RetryIfStatus(503))), layers: true},
		{name: "giving up on 429", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2)))},
		{name: "body not replayable", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.SyncRequest, once: true},
		{name: "context canceled", addr: refused, policy: retries.DocV1, cancel: true},
		{name: "attempt timeout", addr: func(t *testing.T) string {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			return tpServe(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}).Listener.Addr().String()
		}, policy: retries.DocV1.Copy(retries.WithStop(retries.StopAfterAttempt(2))), timeout: 10 * time.Millisecond, attemptErrs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const path = "/document/v1/ns/doc/docid/1"
			rawURL := "http://admin:" + password + "@" + tc.addr(t) + path
			wantURL := strings.Replace(rawURL, password, "xxxxx", 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			var rb io.Reader = strings.NewReader(body)
			if tc.once {
				rb = onceReader{rb}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, rb)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			var opts []retries.TransportOption
			if tc.timeout > 0 {
				opts = append(opts, retries.WithAttemptTimeout(tc.timeout))
			}
			var base http.RoundTripper = tpNewTracker(t)
			if tc.layers {
				base = retries.NewTransport(base, retries.Throttle.Copy(tpNoWait))
			}
			var (
				attemptErrs []error
				hookReqs    []string
			)
			p := tc.policy.Copy(tpNoWait, retries.WithAfter(func(ctx context.Context, s retries.State) {
				if m, u, ok := retries.TransportRequest(ctx); ok {
					hookReqs = append(hookReqs, m+" "+u)
				}
				if s.Err != nil {
					attemptErrs = append(attemptErrs, s.Err)
				}
			}))
			rt := retries.NewTransport(base, p, opts...)

			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("RoundTrip() error = nil, want an error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, secret := range []string{password, token, body} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q contains %q", msg, secret)
				}
			}
			// http.Client names the request; RoundTrip does not, as
			// http.Transport does not.
			if strings.Contains(msg, path) || strings.Contains(msg, "retries: retries:") {
				t.Errorf("RoundTrip() error %q names the request", msg)
			}
			// The predicate and the hooks see each attempt's error as the
			// base RoundTripper returned it, unnamed; the hooks find the
			// request with TransportRequest.
			if tc.attemptErrs && len(attemptErrs) == 0 {
				t.Error("no attempt failed with an error")
			}
			for _, err := range attemptErrs {
				if strings.Contains(err.Error(), path) {
					t.Errorf("attempt error %q names the request", err)
				}
			}
			if tc.attemptErrs && len(hookReqs) == 0 {
				t.Error("the after hook never found the request")
			}
			for _, r := range hookReqs {
				if r != http.MethodPost+" "+wantURL {
					t.Errorf("TransportRequest in the hook = %q, want %q", r, http.MethodPost+" "+wantURL)
				}
			}
			// Through an http.Client, the client's own wrapping leaks nothing either.
			req2, _ := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(body))
			req2.Header.Set("Authorization", "Bearer "+token)
			resp, err = (&http.Client{Transport: rt}).Do(req2)
			if err == nil {
				resp.Body.Close()
			} else {
				t.Log(err)
			}
			for _, secret := range []string{password, token, body} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("client error %q contains %q", err, secret)
				}
			}
			if err != nil && (strings.Count(err.Error(), path) != 1 || strings.Contains(err.Error(), "retries: retries:")) {
				t.Errorf("client error %q does not name the request exactly once", err)
			}
		})
	}
}

// tpTimeouts reports what code written for http.Client's errors reads:
// (*url.Error).Timeout and net.Error's Timeout.
func tpTimeouts(err error) (urlTimeout, netTimeout bool) {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) && ue.Timeout(), errors.As(err, &ne) && ne.Timeout()
}

// TestTransportTimeoutThroughClient checks that a Transport's timeouts are
// timeouts to code written for http.Client, and that other errors are not.
func TestTransportTimeoutThroughClient(t *testing.T) {
	errRefused := errors.New("connection refused")
	stall := func(_ int, req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		return nil, context.Cause(req.Context())
	}
	throttled := func(_ int, req *http.Request) (*http.Response, error) {
		resp := tpResponse(req, http.StatusTooManyRequests, io.NopCloser(strings.NewReader("slow down")))
		resp.Header.Set("Retry-After", "10")
		return resp, nil
	}
	retryAfter := retries.Throttle.Copy(retries.WithWait(retries.WaitRetryAfter(retries.Throttle.Wait(), time.Minute)))
	for _, tc := range []struct {
		name     string
		respond  func(int, *http.Request) (*http.Response, error)
		policy   retries.Policy
		opts     []retries.TransportOption
		deadline time.Duration // of the caller's context; 0: none
		cancel   bool          // cancel the caller's context after 1s
		noWait   bool          // remove the policy's waits
		want     bool
	}{
		{name: "caller's deadline during an attempt", respond: stall, policy: retries.DocV1, deadline: time.Second, noWait: true, want: true},
		{name: "Retry-After past the deadline", respond: throttled, policy: retryAfter, deadline: 3 * time.Second, want: true},
		{name: "DocV1 gives up on attempt timeouts", respond: stall, policy: retries.DocV1,
			opts: []retries.TransportOption{retries.WithAttemptTimeout(200 * time.Millisecond)}, noWait: true, want: true},
		{name: "Query gives up on attempt timeouts", respond: stall, policy: retries.Query,
			opts: []retries.TransportOption{retries.WithAttemptTimeout(200 * time.Millisecond)}, noWait: true, want: true},
		{name: "caller cancels during attempt timeouts", respond: stall, policy: retries.DocV1.Copy(retries.WithStop(retries.StopNever())),
			opts: []retries.TransportOption{retries.WithAttemptTimeout(300 * time.Millisecond)}, cancel: true, noWait: true, want: false},
		{name: "DocV1 gives up on a refused connection", respond: func(int, *http.Request) (*http.Response, error) {
			return nil, errRefused
		}, policy: retries.DocV1, noWait: true, want: false},
		{name: "Throttle gives up on 429s", respond: throttled, policy: retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2))), noWait: true, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				if tc.cancel {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
					time.AfterFunc(time.Second, cancel)
				}
				p := tc.policy
				if tc.noWait {
					p = p.Copy(tpNoWait)
				}
				client := &http.Client{Transport: retries.NewTransport(tpNewFake(tc.respond), p, tc.opts...)}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/a", nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatal("Do() error = nil, want an error")
				}
				urlTimeout, netTimeout := tpTimeouts(err)
				if urlTimeout != tc.want || netTimeout != tc.want {
					t.Errorf("Do() error = %v: (*url.Error).Timeout() = %v, net.Error Timeout() = %v, want %v", err, urlTimeout, netTimeout, tc.want)
				}
			})
		})
	}
}

// TestTransportTimeoutMatchesHTTPTransport runs the caller's deadline
// against a real stalled server, through a plain http.Transport and through
// a Transport around one: both report a timeout.
func TestTransportTimeoutMatchesHTTPTransport(t *testing.T) {
	release := make(chan struct{})
	srv := tpServe(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		name string
		rt   func(base http.RoundTripper) http.RoundTripper
	}{
		{"http.Transport", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"Transport with DocV1", func(base http.RoundTripper) http.RoundTripper {
			return retries.NewTransport(base, retries.DocV1.Copy(tpNoWait))
		}},
		{"Transport with SyncRequest", func(base http.RoundTripper) http.RoundTripper {
			return retries.NewTransport(base, retries.SyncRequest.Copy(tpNoWait))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := (&http.Client{Transport: tc.rt(tpNewTracker(t))}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("Do() error = nil, want a timeout")
			}
			if urlTimeout, netTimeout := tpTimeouts(err); !urlTimeout || !netTimeout {
				t.Errorf("Do() error = %v: (*url.Error).Timeout() = %v, net.Error Timeout() = %v, want true", err, urlTimeout, netTimeout)
			}
		})
	}
}

// TestTransportNeverReturnsNothing gives the Transport a policy whose
// exhaustion callback swallows the last error: RoundTrip returns that error
// rather than neither a response nor an error.
func TestTransportNeverReturnsNothing(t *testing.T) {
	errRefused := errors.New("connection refused")
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name       string
		body       func() io.Reader
		opts       []retries.TransportOption
		wantNotRep bool // the error also matches ErrBodyNotReplayable
	}{
		{name: "replayable body", body: func() io.Reader { return strings.NewReader("doc") }},
		{name: "POST with WithIdempotentOnly", body: func() io.Reader { return strings.NewReader("doc") },
			opts: []retries.TransportOption{retries.WithIdempotentOnly()}},
		{name: "body not replayable", body: func() io.Reader { return onceReader{strings.NewReader("doc")} }, wantNotRep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := tpNewFake(func(int, *http.Request) (*http.Response, error) { return nil, errRefused })
				p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)),
					retries.WithOnExhausted(func(retries.State) error { return nil }))
				req, _ := http.NewRequest(http.MethodPost, "http://example.test/doc", tc.body())
				resp, err := retries.NewTransport(fake, p, tc.opts...).RoundTrip(req)
				if resp != nil || !errors.Is(err, errRefused) {
					t.Fatalf("RoundTrip() = %v, %v, want nil and the last attempt's error", resp, err)
				}
				if got := errors.Is(err, retries.ErrBodyNotReplayable); got != tc.wantNotRep {
					t.Errorf("errors.Is(%v, ErrBodyNotReplayable) = %v, want %v", err, got, tc.wantNotRep)
				}
			})
		})
	}
}

// TestTransportClientNamesRequestOnce checks the messages of errors through
// an http.Client: the client names the request, and the Transport does not
// name it again.
func TestTransportClientNamesRequestOnce(t *testing.T) {
	errRefused := errors.New("connection refused")
	refused := func(int, *http.Request) (*http.Response, error) { return nil, errRefused }
	for _, tc := range []struct {
		name    string
		respond func(int, *http.Request) (*http.Response, error)
		policy  retries.Policy
		want    string
	}{
		{"RetryError", refused, retries.Query,
			`Get "http://example.test/a": retries: giving up after 5 attempts: connection refused`},
		{"last error", refused, retries.DocV1,
			`Get "http://example.test/a": connection refused`},
		{"last status", func(_ int, req *http.Request) (*http.Response, error) {
			return tpResponse(req, http.StatusTooManyRequests, http.NoBody), nil
		}, retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2))),
			`Get "http://example.test/a": retries: giving up after 2 attempts: last outcome *http.Response with status 429`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := &http.Client{Transport: retries.NewTransport(tpNewFake(tc.respond), tc.policy.Copy(tpNoWait))}
				_, err := client.Get("http://example.test/a")
				if err == nil || err.Error() != tc.want {
					t.Errorf("Get() error = %v, want %s", err, tc.want)
				}
			})
		})
	}
}

// TestTransportRetryAfterThroughInnerLayer checks that the outer layer of
// two Transports still reads the Retry-After of the inner layer's last 429,
// which it finds in the inner layer's *RetryError.
func TestTransportRetryAfterThroughInnerLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := tpNewFake(func(_ int, req *http.Request) (*http.Response, error) {
			resp := tpResponse(req, http.StatusTooManyRequests, io.NopCloser(strings.NewReader("slow down")))
			resp.Header.Set("Retry-After", "7")
			return resp, nil
		})
		inner := retries.NewTransport(fake, retries.Throttle.Copy(tpNoWait, retries.WithStop(retries.StopAfterAttempt(2))))
		var waits []time.Duration
		outer := retries.NewTransport(inner, retries.DocV1.Copy(
			retries.WithWait(retries.WaitRetryAfter(retries.WaitNone(), time.Minute)),
			retries.WithBeforeSleep(func(_ context.Context, s retries.State) { waits = append(waits, s.Wait) })))
		resp, err := (&http.Client{Transport: outer}).Get("http://example.test/a")
		if resp != nil || err == nil {
			t.Fatalf("Get() = %v, %v, want the inner layer's RetryError", resp, err)
		}
		if want := []time.Duration{7 * time.Second, 7 * time.Second}; fmt.Sprint(waits) != fmt.Sprint(want) {
			t.Errorf("outer waits = %v, want %v", waits, want)
		}
		if len(fake.calls) != 6 {
			t.Errorf("%d requests, want 6 (3 outer attempts of 2)", len(fake.calls))
		}
	})
}

// TestTransportEOFIsAConnectionError: a server that closes the connection
// before answering gives the base RoundTripper's io.EOF, which the policy
// sees as a connection error (SyncRequest retries it), as it does through
// an http.Client's *url.Error.
func TestTransportEOFIsAConnectionError(t *testing.T) {
	t.Parallel()
	srv := tpServe(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 { // n counts from 1
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		}
	})
	var seen []error
	p := retries.SyncRequest.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { seen = append(seen, s.Err) }))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	resp, err := retries.NewTransport(nil, p).RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip() error = %v, want the third attempt's 200", err)
	}
	resp.Body.Close()
	if len(seen) != 2 {
		t.Fatalf("attempts retried = %d, want 2", len(seen))
	}
	for _, err := range seen {
		if !errors.Is(err, io.EOF) || !retries.IsConnectionError(err) {
			t.Errorf("attempt error %v: errors.Is(io.EOF) = %v, IsConnectionError = %v; want both", err, errors.Is(err, io.EOF), retries.IsConnectionError(err))
		}
	}
}
