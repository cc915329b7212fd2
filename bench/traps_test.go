package bench

// The traps of retry code, run against every library that has the feature.
// Each row asserts what that library was observed to do at the version
// pinned in go.mod, so a row documents a fact rather than a preference; the
// row for retries asserts the correct behaviour. Waits run on synctest's
// fake clock, so the tests take no real time.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	retrygo "github.com/avast/retry-go/v4"
	retrygov5 "github.com/avast/retry-go/v5"
	backoffv4 "github.com/cenkalti/backoff/v4"
	backoffv5 "github.com/cenkalti/backoff/v5"
	backoffv7 "github.com/cenkalti/backoff/v7"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/seed32e55400/retries"
	goretry "github.com/sethvargo/go-retry"
)

// errStop ends a never-stopping call: each adapter turns it into its
// library's way of saying "do not retry this".
var errStop = errors.New("stop retrying")

// peer runs a function under one library, configured as the traps need.
type peer struct {
	// fixed calls fn under ctx at most n times, waiting d between calls,
	// with no jitter, and retrying every error.
	fixed func(ctx context.Context, d time.Duration, n int, fn func() error) error
	// expo calls fn under ctx with the library's own exponential backoff:
	// 1 s after the first call, doubling, capped at 10 s, no jitter, and
	// never giving up by itself; an error matching errStop ends the call.
	expo func(ctx context.Context, fn func() error) error
}

// peers maps each sub-test name to its library's adapter.
var peers = map[string]peer{
	"retries": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			p := retries.New(retries.WithStop(retries.StopAfterAttempt(n)), retries.WithWait(retries.WaitFixed(d)))
			return p.Do(ctx, func(context.Context) error { return fn() })
		},
		expo: func(ctx context.Context, fn func() error) error {
			p := retries.New(
				retries.WithStop(retries.StopNever()),
				retries.WithWait(retries.WaitExponential(retries.Exponential{Multiplier: time.Second, Base: 2, Max: 10 * time.Second})),
				retries.WithRetry(retries.RetryNot(retries.RetryIfErrorIs(errStop))),
			)
			return p.Do(ctx, func(context.Context) error { return fn() })
		},
	},
	"backoff_v4": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			// WithMaxRetries counts retries, one fewer than attempts.
			return backoffv4.Retry(fn, backoffv4.WithContext(backoffv4.WithMaxRetries(backoffv4.NewConstantBackOff(d), uint64(n-1)), ctx))
		},
		expo: func(ctx context.Context, fn func() error) error {
			b := backoffv4.NewExponentialBackOff(
				backoffv4.WithInitialInterval(time.Second), backoffv4.WithMultiplier(2),
				backoffv4.WithRandomizationFactor(0), backoffv4.WithMaxInterval(10*time.Second),
				backoffv4.WithMaxElapsedTime(0), // 0: never stop
			)
			return backoffv4.Retry(func() error { return permanentIfStop(fn(), backoffv4.Permanent) }, backoffv4.WithContext(b, ctx))
		},
	},
	"backoff_v5": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			_, err := backoffv5.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn() },
				backoffv5.WithBackOff(backoffv5.NewConstantBackOff(d)), backoffv5.WithMaxTries(uint(n)))
			return err
		},
		expo: func(ctx context.Context, fn func() error) error {
			b := &backoffv5.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, RandomizationFactor: 0, MaxInterval: 10 * time.Second}
			_, err := backoffv5.Retry(ctx, func() (struct{}, error) { return struct{}{}, permanentIfStop(fn(), backoffv5.Permanent) },
				backoffv5.WithBackOff(b), backoffv5.WithMaxElapsedTime(0)) // 0: no 15-minute default limit
			return err
		},
	},
	"backoff_v7": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			_, err := backoffv7.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn() },
				backoffv7.WithBackOff(backoffv7.NewConstantBackOff(d)), backoffv7.WithMaxTries(uint(n)))
			return err
		},
		expo: func(ctx context.Context, fn func() error) error {
			b := &backoffv7.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, RandomizationFactor: 0, MaxInterval: 10 * time.Second}
			_, err := backoffv7.Retry(ctx, func() (struct{}, error) { return struct{}{}, permanentIfStop(fn(), backoffv7.Permanent) },
				backoffv7.WithBackOff(b), backoffv7.WithMaxElapsedTime(0)) // 0: no 15-minute default limit
			return err
		},
	},
	"retry_go_v4": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			// Attempts counts attempts; FixedDelay without jitter.
			return retrygo.Do(fn, retrygo.Attempts(uint(n)), retrygo.Delay(d), retrygo.MaxJitter(0),
				retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx))
		},
		expo: func(ctx context.Context, fn func() error) error {
			// Attempts(0) retries until success; BackOffDelay doubles Delay
			// and MaxDelay caps it.
			return retrygo.Do(func() error { return permanentIfStop(fn(), retrygo.Unrecoverable) },
				retrygo.Attempts(0), retrygo.Delay(time.Second), retrygo.MaxDelay(10*time.Second), retrygo.MaxJitter(0),
				retrygo.DelayType(retrygo.BackOffDelay), retrygo.Context(ctx))
		},
	},
	"retry_go_v4_unlimited": {
		fixed: func(ctx context.Context, d time.Duration, _ int, fn func() error) error {
			// Attempts(0) retries until success, through a separate loop
			// whose context handling differs from the one of Attempts(n).
			return retrygo.Do(fn, retrygo.Attempts(0), retrygo.Delay(d), retrygo.MaxJitter(0),
				retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx))
		},
	},
	"retry_go_v5": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			// The options of v4, given to New; the Retrier holds ctx.
			return retrygov5.New(retrygov5.Attempts(uint(n)), retrygov5.Delay(d), retrygov5.MaxJitter(0),
				retrygov5.DelayType(retrygov5.FixedDelay), retrygov5.Context(ctx)).Do(fn)
		},
		expo: func(ctx context.Context, fn func() error) error {
			return retrygov5.New(retrygov5.Attempts(0), retrygov5.Delay(time.Second), retrygov5.MaxDelay(10*time.Second),
				retrygov5.MaxJitter(0), retrygov5.DelayType(retrygov5.BackOffDelay), retrygov5.Context(ctx),
			).Do(func() error { return permanentIfStop(fn(), retrygov5.Unrecoverable) })
		},
	},
	"retry_go_v5_unlimited": {
		fixed: func(ctx context.Context, d time.Duration, _ int, fn func() error) error {
			// Attempts(0) retries until success, through the separate loop
			// that v4 has too.
			return retrygov5.New(retrygov5.Attempts(0), retrygov5.Delay(d), retrygov5.MaxJitter(0),
				retrygov5.DelayType(retrygov5.FixedDelay), retrygov5.Context(ctx)).Do(fn)
		},
	},
	"go_retry": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			// WithMaxRetries counts retries; only RetryableError is retried.
			return goretry.Do(ctx, goretry.WithMaxRetries(uint64(n-1), goretry.NewConstant(d)), func(context.Context) error {
				return goretry.RetryableError(fn())
			})
		},
		expo: func(ctx context.Context, fn func() error) error {
			b := goretry.WithCappedDuration(10*time.Second, goretry.NewExponential(time.Second))
			return goretry.Do(ctx, b, func(context.Context) error {
				err := fn()
				if errors.Is(err, errStop) {
					return err // not marked retryable: ends the call
				}
				return goretry.RetryableError(err)
			})
		},
	},
	"failsafe": {
		fixed: func(ctx context.Context, d time.Duration, n int, fn func() error) error {
			rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(n).WithDelay(d).Build()
			return failsafe.With(rp).WithContext(ctx).Run(fn)
		},
		expo: func(ctx context.Context, fn func() error) error {
			// WithBackoff doubles the delay up to its max; -1 retries
			// without limit.
			rp := retrypolicy.NewBuilder[any]().WithMaxRetries(-1).WithBackoff(time.Second, 10*time.Second).AbortOnErrors(errStop).Build()
			return failsafe.With(rp).WithContext(ctx).Run(fn)
		},
	},
}

// permanentIfStop marks err with a library's "do not retry" wrapper when it
// is errStop.
func permanentIfStop(err error, permanent func(error) error) error {
	if errors.Is(err, errStop) {
		return permanent(err)
	}
	return err
}

// counter is an operation that always fails and records when it was
// called, on the bubble's fake clock.
type counter struct {
	calls []time.Time
	stop  int // return errStop on this call (from 1); 0 never
}

func (c *counter) call() error {
	c.calls = append(c.calls, time.Now())
	if len(c.calls) == c.stop {
		return errStop
	}
	return errTemporary
}

// TestTrapCancelDuringWait cancels the context half-way through the first
// 1 s wait. The correct error matches both context.Canceled and the last
// attempt's error, so that the caller can tell why it gave up and what was
// failing.
func TestTrapCancelDuringWait(t *testing.T) {
	for _, tc := range []struct {
		impl             string
		wantLast, wantCx bool
	}{
		{"retries", true, true},     // *RetryError wraps both.
		{"backoff_v4", false, true}, // returns ctx.Err() alone: the last error is lost.
		{"backoff_v5", false, true}, // returns context.Cause(ctx) alone.
		{"backoff_v7", true, true},  // *RetryError holds the last error and context.Cause(ctx).
		{"retry_go_v4", true, true}, // retry.Error lists every attempt's error and then ctx's.
		// With Attempts(0) it returns ctx's error alone, unless the
		// WrapContextErrorWithLastError option is set.
		{"retry_go_v4_unlimited", false, true},
		{"retry_go_v5", true, true},            // as v4.
		{"retry_go_v5_unlimited", false, true}, // as v4.
		{"go_retry", false, true},              // returns context.Cause(ctx) alone.
		{"failsafe", false, true},              // returns ctx.Err() alone.
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(500*time.Millisecond, cancel)
				var c counter
				err := peers[tc.impl].fixed(ctx, time.Second, 5, c.call)
				if len(c.calls) != 1 {
					t.Errorf("calls = %d, want 1", len(c.calls))
				}
				gotLast, gotCx := errors.Is(err, errTemporary), errors.Is(err, context.Canceled)
				t.Logf("error %q: matches last error %v, matches context.Canceled %v", err, gotLast, gotCx)
				if gotLast != tc.wantLast {
					t.Errorf("errors.Is(err, last error) = %v, want %v (err = %v)", gotLast, tc.wantLast, err)
				}
				if gotCx != tc.wantCx {
					t.Errorf("errors.Is(err, context.Canceled) = %v, want %v (err = %v)", gotCx, tc.wantCx, err)
				}
			})
		})
	}
}

// TestTrapContextDoneBeforeCall passes a context that is already canceled.
// The correct number of calls is 0: work started under a dead context is
// wasted, and may not be idempotent.
func TestTrapContextDoneBeforeCall(t *testing.T) {
	for _, tc := range []struct {
		impl      string
		wantCalls int
	}{
		{"retries", 0},               // checks ctx first, returns context.Canceled.
		{"backoff_v4", 1},            // calls first, then finds ctx done in NextBackOff.
		{"backoff_v5", 1},            // calls first, checks ctx after the failure.
		{"backoff_v7", 1},            // the same.
		{"retry_go_v4", 0},           // checks context.Cause(ctx) first.
		{"retry_go_v4_unlimited", 0}, // the same check, before either loop.
		{"retry_go_v5", 0},           // as v4.
		{"retry_go_v5_unlimited", 0}, // as v4.
		{"go_retry", 0},              // checks context.Cause(ctx) at the top of its loop.
		{"failsafe", 1},              // calls first, then finds the execution canceled.
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				var c counter
				err := peers[tc.impl].fixed(ctx, time.Second, 5, c.call)
				t.Logf("%d calls, error %q", len(c.calls), err)
				if len(c.calls) != tc.wantCalls {
					t.Errorf("calls = %d, want %d", len(c.calls), tc.wantCalls)
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("error = %v, want one matching context.Canceled", err)
				}
			})
		})
	}
}

// TestTrapDeadline gives the context a 1.5 s deadline and the policy a
// fixed 1 s wait for an operation that always fails. After the second call,
// at 1 s, the next wait would end at 2 s, past the deadline: the correct
// behaviour returns at once, at 1 s, rather than sleeping into the deadline
// and returning at 1.5 s.
func TestTrapDeadline(t *testing.T) {
	for _, tc := range []struct {
		impl       string
		wantReturn time.Duration
		wantLast   bool // the error matches the last attempt's error
	}{
		{"retries", time.Second, true},                            // skips a wait that cannot end in time; *RetryError matches both.
		{"backoff_v4", 1500 * time.Millisecond, false},            // sleeps until ctx is done, returns ctx.Err().
		{"backoff_v5", 1500 * time.Millisecond, false},            // same.
		{"backoff_v7", 1500 * time.Millisecond, true},             // sleeps until ctx is done; *RetryError keeps the last error.
		{"retry_go_v4", 1500 * time.Millisecond, true},            // sleeps until ctx is done; retry.Error keeps the errors.
		{"retry_go_v4_unlimited", 1500 * time.Millisecond, false}, // sleeps until ctx is done, returns ctx's error alone.
		{"retry_go_v5", 1500 * time.Millisecond, true},            // as v4.
		{"retry_go_v5_unlimited", 1500 * time.Millisecond, false}, // as v4.
		{"go_retry", 1500 * time.Millisecond, false},              // sleeps until ctx is done, returns context.Cause(ctx).
		{"failsafe", 1500 * time.Millisecond, false},              // sleeps until ctx is done, returns ctx.Err().
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
				defer cancel()
				start := time.Now()
				var c counter
				err := peers[tc.impl].fixed(ctx, time.Second, 10, c.call)
				got := time.Since(start)
				gotLast := errors.Is(err, errTemporary)
				t.Logf("returned at %v after %d calls, error %q: matches last error %v", got, len(c.calls), err, gotLast)
				if got != tc.wantReturn {
					t.Errorf("returned at %v, want %v", got, tc.wantReturn)
				}
				if len(c.calls) != 2 {
					t.Errorf("calls = %d, want 2", len(c.calls))
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error = %v, want one matching context.DeadlineExceeded", err)
				}
				if gotLast != tc.wantLast {
					t.Errorf("errors.Is(err, last error) = %v, want %v (err = %v)", gotLast, tc.wantLast, err)
				}
			})
		})
	}
}

// TestTrapExponentialOverflow runs each library's exponential backoff (1 s,
// doubling, capped at 10 s, never stopping) for 101 calls on the fake clock
// and measures the wait after attempts 64, 65 and 100, where 1 s × 2^(n−1)
// has long overflowed an int64 of nanoseconds. The correct wait is the cap,
// 10 s; an overflow shows as a wait of 0 (a hot loop) or of centuries.
func TestTrapExponentialOverflow(t *testing.T) {
	const limit = 10 * time.Second
	for _, tc := range []struct {
		impl string
		want [3]time.Duration // waits after attempts 64, 65, 100
	}{
		{"retries", [3]time.Duration{limit, limit, limit}},     // computes in float64 and saturates, then clamps.
		{"backoff_v4", [3]time.Duration{limit, limit, limit}},  // stops multiplying once the interval reaches the cap.
		{"backoff_v5", [3]time.Duration{limit, limit, limit}},  // same.
		{"backoff_v7", [3]time.Duration{limit, limit, limit}},  // same.
		{"retry_go_v4", [3]time.Duration{limit, limit, limit}}, // limits the shift, then MaxDelay caps.
		{"retry_go_v5", [3]time.Duration{limit, limit, limit}}, // as v4.
		{"go_retry", [3]time.Duration{limit, limit, limit}},    // overflow turns into MaxInt64, which WithCappedDuration caps.
		{"failsafe", [3]time.Duration{limit, limit, limit}},    // multiplies the last delay and takes the min with the cap.
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := counter{stop: 101}
				err := peers[tc.impl].expo(context.Background(), c.call)
				if !errors.Is(err, errStop) {
					t.Errorf("error = %v, want one matching errStop", err)
				}
				if len(c.calls) != 101 {
					t.Fatalf("calls = %d, want 101", len(c.calls))
				}
				wait := func(n int) time.Duration { return c.calls[n].Sub(c.calls[n-1]) }
				// The start of the schedule, to show the backoff is the one asked for.
				if first := [5]time.Duration{wait(1), wait(2), wait(3), wait(4), wait(5)}; first != [5]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, limit} {
					t.Errorf("waits after attempts 1..5 = %v, want [1s 2s 4s 8s 10s]", first)
				}
				got := [3]time.Duration{wait(64), wait(65), wait(100)}
				t.Logf("waits after attempts 64, 65, 100: %v", got)
				if got != tc.want {
					t.Errorf("waits after attempts 64, 65, 100 = %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestTrapHTTPConnections sends one request through one client to a server
// that answers 429 fifty times and then 200, with no waits, and counts the
// TCP connections the server accepted. A client that drains and closes each
// retried response reuses one connection; one that leaves them open needs a
// new connection per attempt. Only retries and go-retryablehttp retry HTTP
// requests; the other libraries have no HTTP client and are left out.
func TestTrapHTTPConnections(t *testing.T) {
	const throttled = 50
	for _, tc := range []struct {
		impl           string
		client         func(base *http.Transport) func(url string) (*http.Response, error)
		minConns, maxC int64
	}{
		{"retries", func(base *http.Transport) func(string) (*http.Response, error) {
			// Drains (≤ 4 KiB) and closes every retried response.
			p := retries.New(retries.WithStop(retries.StopAfterAttempt(throttled+1)), retries.WithRetry(retries.RetryIfStatus(http.StatusTooManyRequests)))
			return (&http.Client{Transport: retries.NewTransport(base, p)}).Get
		}, 1, 1},
		{"retryablehttp", func(base *http.Transport) func(string) (*http.Response, error) {
			// Drains (≤ 4 KiB) and closes every retried response. RetryMax
			// counts retries; Backoff returning 0 removes every wait (its
			// default honours Retry-After and waits at least RetryWaitMin).
			c := &retryablehttp.Client{
				HTTPClient:   &http.Client{Transport: base},
				RetryMax:     throttled,
				RetryWaitMin: 0, RetryWaitMax: 0,
				CheckRetry: retryablehttp.DefaultRetryPolicy,
				Backoff:    func(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return 0 },
			}
			return c.Get
		}, 1, 1},
		{"control: retries leaving responses open", func(base *http.Transport) func(string) (*http.Response, error) {
			// A discard step that keeps every retried response open shows
			// that the count can tell the difference.
			var open []*http.Response
			p := retries.New(retries.WithStop(retries.StopAfterAttempt(throttled+1)), retries.WithRetry(retries.RetryIfStatus(http.StatusTooManyRequests)),
				retries.WithDiscard(func(v any) { open = append(open, v.(*http.Response)) }))
			get := (&http.Client{Transport: retries.NewTransport(base, p)}).Get
			return func(url string) (*http.Response, error) {
				resp, err := get(url)
				for _, r := range open {
					r.Body.Close()
				}
				return resp, err
			}
		}, throttled - 5, throttled + 1},
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			var requests, conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				n := requests.Add(1)
				code := http.StatusOK
				if n <= throttled {
					code = http.StatusTooManyRequests
				}
				w.WriteHeader(code)
				fmt.Fprintf(w, "answer %d: %s", n, http.StatusText(code))
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()

			resp, err := tc.client(base)(srv.URL)
			if err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			if got := requests.Load(); got != throttled+1 {
				t.Errorf("server saw %d requests, want %d", got, throttled+1)
			}
			got := conns.Load()
			t.Logf("%d requests over %d connections", requests.Load(), got)
			if got < tc.minConns || got > tc.maxC {
				t.Errorf("connections = %d, want %d to %d", got, tc.minConns, tc.maxC)
			}
		})
	}
}
