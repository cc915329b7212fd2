package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// tpSettleGoroutines waits, briefly, for the goroutine count to come back
// to base, and fails with a dump of every goroutine if it does not.
func tpSettleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond) // polling for goroutines to exit, not a retry wait
	}
}

func TestTransportCancelDuringWait(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		srv := tpServe(t, tpStatuses(503))
		defer srv.Close()
		sleeping := make(chan struct{}, 1)
		p := retries.DocV1.Copy(
			retries.WithWait(retries.WaitFixed(time.Hour)),
			retries.WithBeforeSleep(func(context.Context, retries.State) { sleeping <- struct{}{} }),
		)
		tracker := tpNewTracker(t)
		defer tracker.CloseIdleConnections()
		client := &http.Client{Transport: retries.NewTransport(tracker, p)}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-sleeping // the first 503 has arrived and the hour-long wait begins
			cancel()
		}()
		req := tpPost(t, ctx, srv.URL, "doc")
		done := make(chan struct{})
		var (
			resp *http.Response
			err  error
		)
		go func() {
			defer close(done)
			resp, err = client.Do(req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Do() did not return after the context was canceled")
		}
		if resp != nil {
			t.Errorf("Do() returned a response with error %v", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do() error = %v, want one matching context.Canceled", err)
		}
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Attempts != 1 {
			t.Errorf("Do() error = %v, want a *RetryError after 1 attempt", err)
		}
		if got := srv.requests.Load(); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
		if open := tracker.open.Load(); open != 0 {
			t.Errorf("%d response bodies left open, want 0", open)
		}
	}()
	tpSettleGoroutines(t, base)
}

// tpStallFirst answers the first attempt only when its context ends, with
// the context's cause (as net/http does), and later attempts with "ok".
func tpStallFirst(n int, req *http.Request) (*http.Response, error) {
	if n == 1 {
		<-req.Context().Done()
		return nil, context.Cause(req.Context())
	}
	return tpResponse(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
}

// The network is not the point of these tests, which run under synctest
// with a fake RoundTripper; TestTransportErrorsLeakNothing,
// TestTransportDiscardsStalledBodyOverNetwork and ExampleWithAttemptTimeout
// run attempt timeouts against real servers.
func TestTransportAttemptTimeout(t *testing.T) {
	const limit = 250 * time.Millisecond
	syncWithTimeouts := retries.SyncRequest.Copy(retries.WithRetry(retries.RetryAny(
		retries.SyncRequest.Retry(), retries.RetryIfErrorIs(retries.ErrAttemptTimeout))))
	for _, tc := range []struct {
		name    string
		policy  retries.Policy
		retried bool
	}{
		{"DocV1 retries a stalled attempt", retries.DocV1, true},
		{"SyncRequest with ErrAttemptTimeout retries it", syncWithTimeouts, true},
		{"SyncRequest alone does not", retries.SyncRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var attemptErrs []error
				p := tc.policy.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { attemptErrs = append(attemptErrs, s.Err) }))
				fake := tpNewFake(tpStallFirst)
				rt := retries.NewTransport(fake, p, retries.WithAttemptTimeout(limit))

				resp, err := rt.RoundTrip(tpPost(t, context.Background(), "http://example.test/doc", "doc"))
				if !tc.retried {
					if resp != nil || !errors.Is(err, retries.ErrAttemptTimeout) {
						t.Fatalf("RoundTrip() = %v, %v, want an error matching ErrAttemptTimeout", resp, err)
					}
					if len(fake.calls) != 1 {
						t.Errorf("%d attempts, want 1", len(fake.calls))
					}
					return
				}
				if err != nil {
					t.Fatalf("RoundTrip() error = %v, want nil", err)
				}
				if got := tpRead(t, resp); got != "ok" {
					t.Errorf("body = %q, want ok", got)
				}
				if want := []time.Duration{0, limit}; fmt.Sprint(fake.calls) != fmt.Sprint(want) {
					t.Errorf("attempts at %v, want %v", fake.calls, want)
				}
				if len(attemptErrs) != 1 {
					t.Fatalf("%d retried attempts, want 1", len(attemptErrs))
				}
				err = attemptErrs[0]
				if !errors.Is(err, retries.ErrAttemptTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("attempt error = %v, want ErrAttemptTimeout and no context error", err)
				}
				var timeout interface{ Timeout() bool }
				if !errors.As(err, &timeout) || !timeout.Timeout() {
					t.Errorf("attempt error %v does not report Timeout() = true", err)
				}
			})
		})
	}

	t.Run("a base that reports only the context's error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Some RoundTrippers report a canceled request with ctx.Err(),
			// not its cause: the timeout must still be told from a
			// cancellation.
			fake := tpNewFake(func(n int, req *http.Request) (*http.Response, error) {
				resp, err := tpStallFirst(n, req)
				if err != nil {
					err = req.Context().Err()
				}
				return resp, err
			})
			var attemptErrs []error
			p := retries.DocV1.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { attemptErrs = append(attemptErrs, s.Err) }))
			resp, err := retries.NewTransport(fake, p, retries.WithAttemptTimeout(limit)).
				RoundTrip(tpPost(t, context.Background(), "http://example.test/doc", "doc"))
			if err != nil {
				t.Fatalf("RoundTrip() error = %v, want nil", err)
			}
			tpRead(t, resp)
			if len(attemptErrs) != 1 || !errors.Is(attemptErrs[0], retries.ErrAttemptTimeout) || errors.Is(attemptErrs[0], context.Canceled) {
				t.Errorf("attempt errors = %v, want one matching ErrAttemptTimeout and not context.Canceled", attemptErrs)
			}
		})
	})

	t.Run("the caller's deadline is not retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := tpNewFake(tpStallFirst)
			rt := retries.NewTransport(fake, retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()

			start := time.Now()
			resp, err := rt.RoundTrip(tpPost(t, ctx, "http://example.test/doc", "doc"))
			if resp != nil {
				t.Errorf("RoundTrip() returned a response with error %v", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, retries.ErrAttemptTimeout) {
				t.Errorf("RoundTrip() error = %v, want context.DeadlineExceeded, not ErrAttemptTimeout", err)
			}
			if len(fake.calls) != 1 || time.Since(start) != 50*time.Millisecond {
				t.Errorf("%d attempts over %v, want 1 over 50ms", len(fake.calls), time.Since(start))
			}
		})
	})

	t.Run("the body outlives the limit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const limit = 100 * time.Millisecond
			fake := tpNewFake(func(_ int, req *http.Request) (*http.Response, error) {
				// The header arrives in time, and the rest of the body
				// after the limit, read under the attempt's context.
				late := tpReaderFunc(func(p []byte) (int, error) {
					time.Sleep(3 * limit)
					if err := req.Context().Err(); err != nil {
						return 0, err
					}
					return copy(p, "body after it"), io.EOF
				})
				body := io.MultiReader(strings.NewReader("header arrives in time, "), late)
				return tpResponse(req, http.StatusOK, io.NopCloser(body)), nil
			})
			rt := retries.NewTransport(fake, retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(limit))
			resp, err := rt.RoundTrip(tpPost(t, context.Background(), "http://example.test/doc", "doc"))
			if err != nil {
				t.Fatalf("RoundTrip() error = %v, want nil", err)
			}
			attemptCtx := resp.Request.Context()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the body after the limit: %v", err)
			}
			if got, want := string(body), "header arrives in time, body after it"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			resp.Body.Close()
			if attemptCtx.Err() == nil {
				t.Error("the attempt's context is still live after the body was read and closed")
			}
		})
	})

	t.Run("closing an unread body ends the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := tpNewFake(func(_ int, req *http.Request) (*http.Response, error) {
				return tpResponse(req, http.StatusOK, io.NopCloser(strings.NewReader(strings.Repeat("x", 1000)))), nil
			})
			rt := retries.NewTransport(fake, retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))
			resp, err := rt.RoundTrip(tpPost(t, context.Background(), "http://example.test/doc", "doc"))
			if err != nil {
				t.Fatalf("RoundTrip() error = %v, want nil", err)
			}
			attemptCtx := resp.Request.Context()
			if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			if attemptCtx.Err() != nil {
				t.Fatal("the attempt's context ended before the body was closed")
			}
			resp.Body.Close()
			if attemptCtx.Err() == nil {
				t.Error("the attempt's context is still live after the body was closed")
			}
		})
	})
}

// tpReaderFunc is an io.Reader made of a function.
type tpReaderFunc func([]byte) (int, error)

func (f tpReaderFunc) Read(p []byte) (int, error) { return f(p) }

func TestWithAttemptTimeoutPanicsOnNegative(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "retries:") {
			t.Errorf("WithAttemptTimeout(-1) panic = %v, want one starting with retries:", r)
		}
	}()
	retries.WithAttemptTimeout(-1)
}
