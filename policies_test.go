package retries_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// The numbers in these tests are pyvespa's: the parameters of the policies
// in its vespa/retries.py, and the cases of its tests (tests/unit/
// test_retries.py and test_retry_controls.py), named in a comment where a
// case ports one. The other cases are this package's own.

func TestPolicyStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    retries.Policy
		want retries.Stop
	}{
		{"query", retries.Query, retries.StopAfterAttempt(5)},
		{"docv1", retries.DocV1, retries.StopAfterAttempt(3)},
		{"throttle", retries.Throttle, retries.StopNever()},
		{"sync_request", retries.SyncRequest, retries.StopAfterAttempt(11)},
		{"visit", retries.Visit, retries.StopAfterAttempt(3)},
		{"control_plane", retries.ControlPlane, retries.StopAfterAttempt(3)},
		{"url_validation", retries.URLValidation, retries.StopAfterAttempt(3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Stop(); got != tc.want {
				t.Errorf("Stop() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPolicyWaitBounds checks every policy's wait after attempts 1 to 12
// against pyvespa's formulas, computed here independently in float seconds.
func TestPolicyWaitBounds(t *testing.T) {
	t.Parallel()
	pow2 := func(n int) float64 { return math.Pow(2, float64(n-1)) }
	for _, tc := range []struct {
		name   string
		p      retries.Policy
		lo, hi func(n int) float64
	}{
		{"query", retries.Query, func(int) float64 { return 0 }, func(n int) float64 { return math.Min(60, 1.5*pow2(n)) }},
		{"docv1", retries.DocV1, pow2, pow2},
		{"throttle", retries.Throttle, func(int) float64 { return 0 }, func(n int) float64 { return math.Min(10, pow2(n)) }},
		{"sync_request", retries.SyncRequest,
			func(n int) float64 { return 0.1 * math.Pow(1.618, float64(n-1)) },
			func(n int) float64 { return 0.1*math.Pow(1.618, float64(n-1)) + 1 }},
		{"visit", retries.Visit, func(int) float64 { return 0 }, func(int) float64 { return 0 }},
		{"control_plane", retries.ControlPlane, func(n int) float64 { return math.Min(3, pow2(n)) }, func(n int) float64 { return math.Min(3, pow2(n)) }},
		{"url_validation", retries.URLValidation,
			func(n int) float64 { return math.Max(1, math.Min(10, pow2(n))) },
			func(n int) float64 { return math.Max(1, math.Min(10, pow2(n))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n := 1; n <= 12; n++ {
				lo, hi := tc.p.Wait().Bounds(retries.State{Attempt: n})
				if !near(lo, tc.lo(n)) || !near(hi, tc.hi(n)) {
					t.Errorf("attempt %d: Bounds() = [%v, %v], want [%gs, %gs]", n, lo, hi, tc.lo(n), tc.hi(n))
				}
			}
		})
	}
}

// near reports whether d is within a microsecond of f seconds.
func near(d time.Duration, f float64) bool {
	return math.Abs(d.Seconds()-f) < 1e-6
}

// TestQuery checks Query: 5 attempts on any error with full-jitter waits,
// then a RetryError; a 503 response is not inspected.
func TestQuery(t *testing.T) {
	t.Parallel()
	caps := []time.Duration{secs(1.5), secs(3), secs(6), secs(12)}
	synctest.Test(t, func(t *testing.T) {
		distinct := map[time.Duration]bool{}
		var totals time.Duration
		const runs = 200
		for range runs {
			s, err := runErr(t, t.Context(), retries.Query, func(int) error { return errBoom })
			if len(s.calls) != 5 {
				t.Fatalf("calls = %d, want 5", len(s.calls))
			}
			if total := s.calls[4]; total > secs(22.5) {
				t.Fatalf("total wait = %v, want at most 22.5s", total)
			} else {
				totals += total
			}
			for i, d := range s.sleeps() {
				if d < 0 || d > caps[i] {
					t.Fatalf("sleep %d = %v, want within [0, %v]", i+1, d, caps[i])
				}
				distinct[d] = true
			}
			var re *retries.RetryError
			if !errors.As(err, &re) || re.Attempts != 5 || !errors.Is(err, errBoom) || re.ContextErr != nil {
				t.Fatalf("Do() = %v, want a RetryError after 5 attempts wrapping boom", err)
			}
		}
		if len(distinct) < 100 {
			t.Errorf("only %d distinct sleeps in 800: the wait is not random", len(distinct))
		}
		// The mean total is 11.25 s; over 200 runs its standard error is
		// about 0.28 s.
		if mean := totals / runs; mean < secs(9.75) || mean > secs(12.75) {
			t.Errorf("mean total wait = %v, want 11.25s ± 1.5s", mean)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		resp, s, err := runValue(t, t.Context(), retries.Query, statusSeq(503))
		if err != nil || resp.StatusCode != 503 || len(s.calls) != 1 {
			t.Errorf("DoValue(503) = %v, %v after %d calls, want the 503 after 1 call", resp.StatusCode, err, len(s.calls))
		}
	})
}

// TestDocV1 ports pyvespa's test_503_retried_three_times_then_returned
// (alone, without the inner layer) and checks the shape of
// DOCV1_RETRY: waits of exactly 1 s and 2 s, the last outcome on giving up.
func TestDocV1(t *testing.T) {
	t.Parallel()
	t.Run("503_forever_returns_last_response", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var bodies []*trackedBody
			resp, s, err := runValue(t, t.Context(), retries.DocV1, func(int) (*http.Response, error) {
				r, b := response(503, "unavailable")
				bodies = append(bodies, b)
				return r, nil
			})
			if err != nil || resp.StatusCode != 503 {
				t.Fatalf("DoValue() = %v, %v, want the 503 response and nil", resp, err)
			}
			if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(s.sleeps(), want) {
				t.Errorf("sleeps = %v, want %v", s.sleeps(), want)
			}
			if body, _ := io.ReadAll(resp.Body); string(body) != "unavailable" {
				t.Errorf("returned body = %q, want it unread and readable", body)
			}
			for i, b := range bodies[:2] {
				if !b.closed.Load() {
					t.Errorf("retried response %d was not closed", i+1)
				}
			}
			if bodies[2].closed.Load() {
				t.Error("the returned response was closed")
			}
		})
	})
	t.Run("error_forever_returns_last_error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, err := runErr(t, t.Context(), retries.DocV1, func(int) error { return errBoom })
			if err != errBoom || len(s.calls) != 3 {
				t.Errorf("Do() = %v after %d calls, want boom itself after 3", err, len(s.calls))
			}
		})
	})
	t.Run("other_status_returned_at_once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			for _, code := range []int{200, 404, 429, 500} {
				resp, s, err := runValue(t, t.Context(), retries.DocV1, statusSeq(code))
				if err != nil || resp.StatusCode != code || len(s.calls) != 1 {
					t.Errorf("DoValue(%d) = %d, %v after %d calls, want it after 1", code, resp.StatusCode, err, len(s.calls))
				}
			}
		})
	})
}

// TestThrottle ports THROTTLE_RETRY: 429 only, never gives up, waits
// U(0, min(10 s, 2^(n−1) s)).
func TestThrottle(t *testing.T) {
	t.Parallel()
	t.Run("429_then_200", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			codes := append(slices.Repeat([]int{429}, 25), 200)
			resp, s, err := runValue(t, t.Context(), retries.Throttle, statusSeq(codes...))
			if err != nil || resp.StatusCode != 200 || len(s.calls) != 26 {
				t.Fatalf("DoValue() = %d, %v after %d calls, want 200 after 26", resp.StatusCode, err, len(s.calls))
			}
			for i, d := range s.sleeps() {
				if limit := min(10*time.Second, time.Second<<i); d < 0 || d > limit {
					t.Errorf("sleep %d = %v, want within [0, %v]", i+1, d, limit)
				}
			}
		})
	})
	t.Run("never_stops_and_never_overflows", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const n = 2000
			codes := append(slices.Repeat([]int{429}, n), 200)
			resp, s, err := runValue(t, t.Context(), retries.Throttle, statusSeq(codes...))
			if err != nil || resp.StatusCode != 200 || len(s.calls) != n+1 {
				t.Fatalf("DoValue() = %d, %v after %d calls, want 200 after %d", resp.StatusCode, err, len(s.calls), n+1)
			}
			var late time.Duration
			for i, d := range s.sleeps() {
				if d < 0 || d > 10*time.Second {
					t.Fatalf("sleep %d = %v, want within [0, 10s]", i+1, d)
				}
				if i >= 64 {
					late += d
				}
			}
			// Past attempt 64 a shift-based cap would be negative or zero;
			// the mean of U(0, 10 s) over the remaining waits is 5 s.
			if mean := late / time.Duration(n-64); mean < 4*time.Second || mean > 6*time.Second {
				t.Errorf("mean late sleep = %v, want about 5s", mean)
			}
		})
		for _, n := range []int{64, 65, 1000, 1_000_000, math.MaxInt32, math.MaxInt} {
			lo, hi := retries.Throttle.Wait().Bounds(retries.State{Attempt: n})
			if lo != 0 || hi != 10*time.Second {
				t.Errorf("attempt %d: Bounds() = [%v, %v], want [0, 10s]", n, lo, hi)
			}
		}
	})
	t.Run("errors_and_other_statuses_pass_through", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, err := runErr(t, t.Context(), retries.Throttle, func(int) error { return errBoom })
			if err != errBoom || len(s.calls) != 1 {
				t.Errorf("Do(error) = %v after %d calls, want boom after 1", err, len(s.calls))
			}
			resp, s, err := runValue(t, t.Context(), retries.Throttle, statusSeq(503))
			if err != nil || resp.StatusCode != 503 || len(s.calls) != 1 {
				t.Errorf("DoValue(503) = %d, %v after %d calls, want 503 after 1", resp.StatusCode, err, len(s.calls))
			}
		})
	})
}

// goldenBase is 0.1 × 1.618^(n−1) seconds, the deterministic part of
// SyncRequest's wait, to the microsecond.
var goldenBase = []float64{0.1, 0.1618, 0.261792, 0.423580, 0.685353, 1.108901, 1.794201, 2.903017, 4.697082, 7.599879}

// TestSyncRequest ports pyvespa's TestSyncRequestRetry and
// test_sync_num_retries_429_zero_sends_once; each subtest names its source.
func TestSyncRequest(t *testing.T) {
	t.Parallel()
	connReset := func(int) error { return &netOpError{syscall.ECONNRESET} }
	t.Run("429_429_200", func(t *testing.T) { // pyvespa test_retries_429_then_returns_success
		synctest.Test(t, func(t *testing.T) {
			resp, s, err := runValue(t, t.Context(), retries.SyncRequest, statusSeq(429, 429, 200))
			if err != nil || resp.StatusCode != 200 || len(s.calls) != 3 {
				t.Errorf("DoValue() = %d, %v after %d calls, want 200 after 3", resp.StatusCode, err, len(s.calls))
			}
		})
	})
	t.Run("always_429_default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			resp, s, err := runValue(t, t.Context(), retries.SyncRequest, statusSeq(429))
			if err != nil || resp.StatusCode != 429 || len(s.calls) != 11 {
				t.Fatalf("DoValue() = %d, %v after %d calls, want the 429 after 11", resp.StatusCode, err, len(s.calls))
			}
			for i, d := range s.sleeps() {
				base := goldenBase[i]
				if d.Seconds() < base-1e-6 || d.Seconds() > base+1+1e-6 {
					t.Errorf("sleep %d = %v, want within [%gs, %gs]", i+1, d, base, base+1)
				}
			}
			// The bases add up to 19.7356 s, plus 10 × U(0, 1 s).
			if total := s.calls[10].Seconds(); total < 19.735605-1e-5 || total > 29.735605+1e-5 {
				t.Errorf("total wait = %gs, want within [19.7356s, 29.7356s]", total)
			}
		})
	})
	t.Run("num_retries_2_always_429", func(t *testing.T) { // pyvespa test_returns_last_429_after_num_retries
		synctest.Test(t, func(t *testing.T) {
			p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(2 + 1)))
			resp, s, err := runValue(t, t.Context(), p, statusSeq(429))
			if err != nil || resp.StatusCode != 429 || len(s.calls) != 3 {
				t.Errorf("DoValue() = %d, %v after %d calls, want the 429 and nil after 3", resp.StatusCode, err, len(s.calls))
			}
		})
	})
	t.Run("num_retries_0_always_429", func(t *testing.T) { // pyvespa test_sync_num_retries_429_zero_sends_once
		synctest.Test(t, func(t *testing.T) {
			p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(0 + 1)))
			resp, s, err := runValue(t, t.Context(), p, statusSeq(429))
			if err != nil || resp.StatusCode != 429 || len(s.calls) != 1 {
				t.Errorf("DoValue() = %d, %v after %d calls, want the 429 after 1", resp.StatusCode, err, len(s.calls))
			}
		})
	})
	t.Run("num_retries_1_connection_reset", func(t *testing.T) { // pyvespa test_retries_connection_error_then_reraises
		synctest.Test(t, func(t *testing.T) {
			p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(1 + 1)))
			s, err := runErr(t, t.Context(), p, connReset)
			var op *netOpError
			if !errors.As(err, &op) || len(s.calls) != 2 {
				t.Errorf("Do() = %v after %d calls, want the reset itself after 2", err, len(s.calls))
			}
			if _, wrapped := err.(*retries.RetryError); wrapped {
				t.Errorf("Do() = %T, want the last error unwrapped", err)
			}
		})
	})
	t.Run("other_error_not_retried", func(t *testing.T) { // pyvespa test_non_connection_error_raises_immediately
		synctest.Test(t, func(t *testing.T) {
			s, err := runErr(t, t.Context(), retries.SyncRequest, func(int) error { return errBoom })
			if err != errBoom || len(s.calls) != 1 {
				t.Errorf("Do() = %v after %d calls, want boom after 1", err, len(s.calls))
			}
		})
	})
	t.Run("503_not_retried", func(t *testing.T) { // pyvespa test_does_not_retry_5xx
		synctest.Test(t, func(t *testing.T) {
			resp, s, err := runValue(t, t.Context(), retries.SyncRequest, statusSeq(503))
			if err != nil || resp.StatusCode != 503 || len(s.calls) != 1 {
				t.Errorf("DoValue() = %d, %v after %d calls, want 503 after 1", resp.StatusCode, err, len(s.calls))
			}
		})
	})
}

// netOpError stands in for a connection failure whose chain holds errno;
// connerr_test.go checks the classification on real failures.
type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string { return "write: " + e.errno.Error() }
func (e *netOpError) Unwrap() error { return e.errno }

// TestVisit ports pyvespa's test_visit_policy_retries_http_error_three_times:
// a StatusError retried 3 times with no wait, then a RetryError; any other
// error passes through.
func TestVisit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		statusErr := &retries.StatusError{StatusCode: 500, Status: "500 Internal Server Error"}
		s, err := runErr(t, t.Context(), retries.Visit, func(int) error { return statusErr })
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || re.Err != statusErr {
			t.Fatalf("Do() = %v, want a RetryError after 3 attempts holding the StatusError", err)
		}
		if want := []time.Duration{0, 0}; !slices.Equal(s.sleeps(), want) {
			t.Errorf("sleeps = %v, want %v", s.sleeps(), want)
		}
		s, err = runErr(t, t.Context(), retries.Visit, func(int) error { return errBoom })
		if err != errBoom || len(s.calls) != 1 {
			t.Errorf("Do(other error) = %v after %d calls, want boom after 1", err, len(s.calls))
		}
	})
}

// TestReraisePolicies checks that ControlPlane and URLValidation give the
// last error itself back after 3 attempts and sleeps of 1 s and 2 s, and
// checks the capped and clamped exponential waits past the third attempt.
func TestReraisePolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		p        retries.Policy
		longWant []time.Duration // sleeps with 6 attempts
	}{
		{"control_plane", retries.ControlPlane, []time.Duration{1e9, 2e9, 3e9, 3e9, 3e9}},
		{"url_validation", retries.URLValidation, []time.Duration{1e9, 2e9, 4e9, 8e9, 10e9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := runErr(t, t.Context(), tc.p, func(int) error { return errBoom })
				if err != errBoom {
					t.Errorf("Do() = %v, want boom itself", err)
				}
				if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(s.sleeps(), want) {
					t.Errorf("sleeps = %v, want %v", s.sleeps(), want)
				}
				s, _ = runErr(t, t.Context(), tc.p.Copy(retries.WithStop(retries.StopAfterAttempt(6))), func(int) error { return errBoom })
				if !slices.Equal(s.sleeps(), tc.longWant) {
					t.Errorf("sleeps with 6 attempts = %v, want %v", s.sleeps(), tc.longWant)
				}
			})
		})
	}
}

// TestDocV1AroundThrottle ports the retry cases of pyvespa's
// TestAsyncDocv1Retry: the two layers of a document/v1 call, each outer
// attempt running a fresh inner policy.
func TestDocV1AroundThrottle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		codes      []int
		wantCalls  int
		wantStatus int
		// wantSleeps lists the layer and the attempt number of each sleep
		// in order: the inner numbers restart after every outer retry.
		wantSleeps []sleepRec
	}{
		// pyvespa test_retries_429_until_success
		{"4x429_then_200", []int{429, 429, 429, 429, 200}, 5, 200,
			[]sleepRec{{"inner", 1, 0}, {"inner", 2, 0}, {"inner", 3, 0}, {"inner", 4, 0}}},
		// pyvespa test_429_retry_is_unbounded
		{"25x429_then_200", append(slices.Repeat([]int{429}, 25), 200), 26, 200, innerSleeps(25)},
		// pyvespa test_503_retried_three_times_then_returned
		{"503_forever", []int{503}, 3, 503,
			[]sleepRec{{"outer", 1, time.Second}, {"outer", 2, 2 * time.Second}}},
		{"429_503_429_429_200", []int{429, 503, 429, 429, 200}, 5, 200,
			[]sleepRec{{"inner", 1, 0}, {"outer", 1, time.Second}, {"inner", 1, 0}, {"inner", 2, 0}}},
		{"404", []int{404}, 1, 404, []sleepRec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sleeps []sleepRec
				record := func(layer string) func(context.Context, retries.State) {
					return func(_ context.Context, s retries.State) { sleeps = append(sleeps, sleepRec{layer, s.Attempt, s.Wait}) }
				}
				outer := retries.DocV1.Copy(retries.WithBeforeSleep(record("outer")))
				inner := retries.Throttle.Copy(retries.WithBeforeSleep(record("inner")))
				calls := 0
				resp, err := retries.DoValue(t.Context(), outer, func(ctx context.Context) (*http.Response, error) {
					return retries.DoValue(ctx, inner, func(context.Context) (*http.Response, error) {
						r, _ := response(tc.codes[min(calls, len(tc.codes)-1)], "")
						calls++
						return r, nil
					})
				})
				if err != nil || resp.StatusCode != tc.wantStatus || calls != tc.wantCalls {
					t.Fatalf("DoValue() = %d, %v after %d requests, want %d after %d", resp.StatusCode, err, calls, tc.wantStatus, tc.wantCalls)
				}
				if tc.wantSleeps == nil {
					return
				}
				if len(sleeps) != len(tc.wantSleeps) {
					t.Fatalf("sleeps = %v, want %v", sleeps, tc.wantSleeps)
				}
				for i, got := range sleeps {
					want := tc.wantSleeps[i]
					if got.layer != want.layer || got.attempt != want.attempt {
						t.Errorf("sleep %d = %v, want %v", i+1, got, want)
					}
					switch got.layer {
					case "outer":
						if got.wait != want.wait {
							t.Errorf("outer sleep %d = %v, want %v", i+1, got.wait, want.wait)
						}
					case "inner":
						if limit := min(10*time.Second, time.Second<<(got.attempt-1)); got.wait > limit {
							t.Errorf("inner sleep %d = %v, want at most %v", i+1, got.wait, limit)
						}
					}
				}
			})
		})
	}
	t.Run("error_forever", func(t *testing.T) { // pyvespa test_exception_retried_three_times_then_reraised
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			start := time.Now()
			_, err := retries.DoValue(t.Context(), retries.DocV1, func(ctx context.Context) (*http.Response, error) {
				return retries.DoValue(ctx, retries.Throttle, func(context.Context) (*http.Response, error) {
					calls++
					return nil, errBoom
				})
			})
			if err != errBoom || calls != 3 || time.Since(start) != 3*time.Second {
				t.Errorf("DoValue() = %v after %d requests and %v, want boom after 3 and 3s", err, calls, time.Since(start))
			}
		})
	})
}

// sleepRec is one sleep of a layered call: its layer, the attempt it
// follows and its length.
type sleepRec struct {
	layer   string
	attempt int
	wait    time.Duration
}

// innerSleeps lists n inner sleeps after attempts 1 to n.
func innerSleeps(n int) []sleepRec {
	recs := make([]sleepRec, n)
	for i := range recs {
		recs[i] = sleepRec{"inner", i + 1, 0}
	}
	return recs
}

// TestCopyLeavesOriginal checks that Copy derives a new value and leaves the
// package variable alone (pyvespa's THROTTLE_RETRY.copy test).
func TestCopyLeavesOriginal(t *testing.T) {
	t.Parallel()
	before := retries.Throttle.String()
	c := retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithWait(retries.WaitNone()))
	if c.Stop() != retries.StopAfterAttempt(2) || c.Wait() != retries.WaitNone() {
		t.Errorf("copy = %v, want stop after 2 and no wait", c)
	}
	if retries.Throttle.Stop() != retries.StopNever() || retries.Throttle.String() != before {
		t.Errorf("Throttle after Copy = %v, want %v", retries.Throttle, before)
	}
	if got := retries.Throttle.Copy(); got.String() != before {
		t.Errorf("Copy() = %v, want %v", got, before)
	}
}

func TestPolicyString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    retries.Policy
		want string
	}{
		{retries.DocV1, "Policy{name: \"DocV1\", stop: StopAfterAttempt(3), wait: WaitExponential(multiplier=1s, base=2, min=0s, max=none), " +
			"retry: RetryAny(RetryIfAnyError(), RetryIfStatus(503)), on exhaustion: retries.ReturnLastOutcome}"},
		{retries.Throttle, "Policy{name: \"Throttle\", stop: StopNever(), wait: WaitRandomExponential(multiplier=1s, base=2, min=0s, max=10s), " +
			"retry: RetryIfStatus(429), on exhaustion: RetryError}"},
		{retries.SyncRequest, "Policy{name: \"SyncRequest\", stop: StopAfterAttempt(11), wait: WaitGoldenJitter(0.1s × 1.618^(n−1) + U(0, 1s)), " +
			"retry: RetryAny(RetryIfError(retries.IsConnectionError), RetryIfStatus(429)), on exhaustion: retries.ReturnLastOutcome}"},
		{retries.Visit, "Policy{name: \"Visit\", stop: StopAfterAttempt(3), wait: WaitNone(), retry: RetryIfErrorAs[*retries.StatusError](), on exhaustion: RetryError}"},
		{retries.URLValidation, "Policy{name: \"URLValidation\", stop: StopAfterAttempt(3), wait: WaitExponential(multiplier=1s, base=2, min=1s, max=10s), " +
			"retry: RetryIfAnyError(), on exhaustion: reraise}"},
		{retries.Policy{}, "Policy{stop: StopAfterAttempt(1), wait: WaitNone(), retry: RetryIfAnyError(), on exhaustion: RetryError}"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
		}
	}
}
