package retries_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/seed32e55400/retries"
)

// always is a policy that retries every error up to n attempts with a fixed
// wait.
func always(n int, wait time.Duration) retries.Policy {
	return retries.New(retries.WithStop(retries.StopAfterAttempt(n)), retries.WithWait(retries.WaitFixed(wait)))
}

func TestZeroPolicyMakesOneAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var p retries.Policy
		s, err := runErr(t, t.Context(), p, func(int) error { return errBoom })
		var re *retries.RetryError
		if len(s.calls) != 1 || !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, errBoom) {
			t.Errorf("Do() = %v after %d calls, want a RetryError wrapping boom after 1", err, len(s.calls))
		}
		if s, err = runErr(t, t.Context(), p, func(int) error { return nil }); err != nil || len(s.calls) != 1 {
			t.Errorf("Do() = %v after %d calls, want nil after 1", err, len(s.calls))
		}
	})
}

func TestNewRetriesAnyErrorByDefault(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
		s, err := runErr(t, t.Context(), p, func(i int) error {
			if i < 2 {
				return errBoom
			}
			return nil
		})
		if err != nil || len(s.calls) != 3 {
			t.Errorf("Do() = %v after %d calls, want nil after 3", err, len(s.calls))
		}
	})
}

func TestNonRetryableErrorIsNotWrapped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.Query.Copy(retries.WithRetry(retries.RetryIfErrorIs(errOther)))
		s, err := runErr(t, t.Context(), p, func(int) error { return errBoom })
		if err != errBoom || len(s.calls) != 1 {
			t.Errorf("Do() = %v after %d calls, want boom itself after 1", err, len(s.calls))
		}
	})
}

func TestPermanentStopsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"permanent", backoff.Permanent(errBoom)},
		{"wrapped_permanent", fmt.Errorf("call: %w", backoff.Permanent(errBoom))},
		{"joined_permanent", errors.Join(errOther, backoff.Permanent(errBoom))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v, s, err := runValue(t, t.Context(), always(5, time.Second), func(int) (int, error) { return 7, tc.err })
				if err != errBoom || v != 7 || len(s.calls) != 1 {
					t.Errorf("DoValue() = %d, %v after %d calls, want 7, boom itself after 1", v, err, len(s.calls))
				}
			})
		})
	}
}

func TestPanicPropagates(t *testing.T) {
	t.Parallel()
	calls := 0
	defer func() {
		if r := recover(); r != "kaboom" || calls != 1 {
			t.Errorf("recover() = %v after %d calls, want kaboom after 1", r, calls)
		}
	}()
	_ = always(3, 0).Do(context.Background(), func(context.Context) error {
		calls++
		panic("kaboom")
	})
}

func TestReraise(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := always(2, 0).Copy(retries.WithReraise(true))
		if _, err := runErr(t, t.Context(), p, func(int) error { return errBoom }); err != errBoom {
			t.Errorf("Do() = %v, want boom itself", err)
		}
		// With a retried value there is nothing to re-raise: tenacity gives
		// a RetryError (tenacity TestReraiseExceptions).
		p = p.Copy(retries.WithRetry(retries.RetryIfValue(func(any) bool { return true })))
		v, _, err := runValue(t, t.Context(), p, func(i int) (int, error) { return 10 + i, nil })
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Value != 11 || re.Err != nil || v != 11 || re.Attempts != 2 {
			t.Errorf("DoValue() = %v, %v, want 11 and a RetryError holding 11 after 2 attempts", v, err)
		}
		if want := "retries: giving up after 2 attempts: last outcome int"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	})
}

func TestOnExhausted(t *testing.T) { // tenacity test_retry_error_callback
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var seen []retries.State
		errGaveUp := errors.New("gave up")
		p := always(3, time.Second).Copy(retries.WithReraise(true), retries.WithOnExhausted(func(s retries.State) error {
			seen = append(seen, s)
			return errGaveUp
		}))
		s, err := runErr(t, t.Context(), p, func(int) error { return errBoom })
		if err != errGaveUp || len(s.calls) != 3 || len(seen) != 1 {
			t.Fatalf("Do() = %v after %d calls and %d callbacks, want gave up after 3 and 1", err, len(s.calls), len(seen))
		}
		if got := seen[0]; got.Attempt != 3 || got.Err != errBoom || got.Slept != 2*time.Second {
			t.Errorf("callback state = %+v, want attempt 3, boom, slept 2s", got)
		}
		// The callback survives Copy, as retry_with keeps it.
		if s, err = runErr(t, t.Context(), p.Copy(retries.WithStop(retries.StopAfterAttempt(5))), func(int) error { return errBoom }); err != errGaveUp || len(s.calls) != 5 {
			t.Errorf("Do() = %v after %d calls, want gave up after 5", err, len(s.calls))
		}
	})
}

// TestHookOrder checks the order of hooks, calls and sleeps, which is
// tenacity's order when every hook records.
func TestHookOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var log []string
		start := time.Now()
		p := always(2, 500*time.Millisecond).Copy(
			retries.WithBefore(func(_ context.Context, s retries.State) {
				log = append(log, fmt.Sprintf("before%d@%v", s.Attempt, s.Elapsed))
			}),
			retries.WithAfter(func(_ context.Context, s retries.State) { log = append(log, fmt.Sprintf("after%d", s.Attempt)) }),
			retries.WithBeforeSleep(func(_ context.Context, s retries.State) {
				log = append(log, fmt.Sprintf("before_sleep(%d, %v)", s.Attempt, s.Wait))
			}),
			retries.WithOnExhausted(func(s retries.State) error {
				log = append(log, fmt.Sprintf("callback%d slept=%v elapsed=%v", s.Attempt, s.Slept, s.Elapsed))
				return s.Err
			}),
		)
		err := p.Do(t.Context(), func(context.Context) error {
			log = append(log, fmt.Sprintf("call@%v", time.Since(start)))
			return errBoom
		})
		want := "before1@0s call@0s after1 before_sleep(1, 500ms) before2@500ms call@500ms after2 callback2 slept=500ms elapsed=500ms"
		if got := strings.Join(log, " "); got != want || err != errBoom {
			t.Errorf("hooks =\n%s\nwant\n%s (err %v)", got, want, err)
		}
	})
}

func TestContextDoneBeforeFirstAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := retries.Query.Do(ctx, func(context.Context) error { calls++; return nil })
	if err != context.Canceled || calls != 0 {
		t.Errorf("Do() = %v after %d calls, want context.Canceled after 0", err, calls)
	}
	errCause := errors.New("shutting down")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errCause)
	_, err = retries.DoValue(ctx, retries.Query, func(context.Context) (int, error) { calls++; return 1, nil })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errCause) || calls != 0 {
		t.Errorf("DoValue() = %v after %d calls, want to match Canceled and the cause, after 0", err, calls)
	}
}

// TestContextEndedByBeforeHook: a context that ends in the before hook (or
// while a shared object admits the attempt) starts no attempt, as DoValue's
// doc promises; the error matches the context's and the last attempt's.
func TestContextEndedByBeforeHook(t *testing.T) {
	t.Parallel()
	for _, shared := range []string{"none", "breaker", "limiter"} {
		t.Run(shared, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := retries.New(retries.WithStop(retries.StopAfterAttempt(5)), retries.WithBefore(func(_ context.Context, st retries.State) {
				if st.Attempt == 2 {
					cancel()
				}
			}))
			switch shared {
			case "breaker":
				p = p.Copy(retries.WithBreaker(retries.NewBreaker(retries.BreakerConfig{})))
			case "limiter":
				p = p.Copy(retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{})))
			}
			calls := 0
			errFail := errors.New("fail")
			err := p.Do(ctx, func(context.Context) error { calls++; return errFail })
			if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, errFail) {
				t.Errorf("Do() = %v after %d calls, want to match Canceled and the first error after 1", err, calls)
			}
		})
	}
}

func TestCancelDuringWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		start := time.Now()
		var discarded []any
		p := always(10, time.Second).Copy(
			retries.WithRetry(retries.RetryIfValue(func(any) bool { return true })),
			retries.WithDiscard(func(v any) { discarded = append(discarded, v) }),
		)
		v, err := retries.DoValue(ctx, p, func(context.Context) (int, error) { return int(time.Since(start) / time.Second), nil })
		if elapsed := time.Since(start); elapsed != 1500*time.Millisecond {
			t.Errorf("DoValue returned after %v, want at the cancel, 1.5s", elapsed)
		}
		var re *retries.RetryError
		if !errors.As(err, &re) || !errors.Is(err, context.Canceled) || re.Attempts != 2 || re.Value != 1 || v != 1 {
			t.Errorf("DoValue() = %v, %v, want 1 and a RetryError matching Canceled after 2 attempts", v, err)
		}
		if len(discarded) != 1 || discarded[0] != 0 {
			t.Errorf("discarded = %v, want only the first value, [0]", discarded)
		}
		if want := "retries: context canceled after 2 attempts: last outcome int"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	})
}

func TestCancelKeepsLastError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		s, err := runErr(t, ctx, retries.DocV1, func(int) error { return errBoom })
		var re *retries.RetryError
		if !errors.As(err, &re) || !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) || len(s.calls) != 1 {
			t.Errorf("Do() = %v after %d calls, want a RetryError matching Canceled and boom after 1", err, len(s.calls))
		}
		if want := "retries: context canceled after 1 attempt: boom"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	})
}

func TestCancelCause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		errCause := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(500*time.Millisecond, func() { cancel(errCause) })
		_, err := runErr(t, ctx, always(3, time.Second), func(int) error { return errBoom })
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errCause) || !errors.Is(err, errBoom) {
			t.Errorf("Do() = %v, want to match Canceled, the cause and boom", err)
		}
	})
}

// TestNoSleepPastDeadline checks that a wait ending at or after the
// deadline is not started, and that Do says so at once.
func TestNoSleepPastDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		wantCalls int
		wantAt    time.Duration // fake time at which Do returns
	}{
		{"next_wait_would_pass", 1500 * time.Millisecond, 2, time.Second},
		{"next_wait_ends_at_deadline", 2 * time.Second, 2, time.Second},
		{"first_wait_would_pass", 500 * time.Millisecond, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
				defer cancel()
				start := time.Now()
				s, err := runErr(t, ctx, always(10, time.Second), func(int) error { return errBoom })
				if at := time.Since(start); at != tc.wantAt || len(s.calls) != tc.wantCalls {
					t.Errorf("Do returned at %v after %d calls, want at %v after %d", at, len(s.calls), tc.wantAt, tc.wantCalls)
				}
				if ctx.Err() != nil {
					t.Errorf("ctx.Err() = %v when Do returned, want nil (the deadline has not passed)", ctx.Err())
				}
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBoom) {
					t.Errorf("Do() = %v, want to match DeadlineExceeded and boom", err)
				}
			})
		})
	}
}

// TestContextErrorNotRetried checks that an error from the caller's own
// context ending is never retried, even by a policy that retries any error
// (pyvespa's DOCV1_RETRY retries and swallows asyncio.CancelledError).
func TestContextErrorNotRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s, err := runErr(t, ctx, retries.DocV1, func(int) error {
			cancel()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || len(s.calls) != 1 {
			t.Errorf("Do() = %v after %d calls, want Canceled after 1", err, len(s.calls))
		}
	})
	// A per-attempt timeout is not the caller's context: it is retried.
	synctest.Test(t, func(t *testing.T) {
		s, err := runErr(t, t.Context(), retries.DocV1, func(i int) error {
			if i == 0 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
				defer cancel()
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		if err != nil || len(s.calls) != 2 {
			t.Errorf("Do() = %v after %d calls, want nil after 2", err, len(s.calls))
		}
	})
}

func TestStatistics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(4)), retries.WithWait(retries.WaitExponential(retries.Exponential{})))
		_, err := runErr(t, t.Context(), p, func(int) error {
			time.Sleep(100 * time.Millisecond) // the attempt's own duration, fake time
			return errBoom
		})
		var re *retries.RetryError
		if !errors.As(err, &re) {
			t.Fatalf("Do() = %v, want a RetryError", err)
		}
		// Elapsed counts from the end of the first attempt, so it leaves
		// out that attempt's 100ms (see State.Elapsed).
		if re.Attempts != 4 || re.Slept != 7*time.Second || re.Elapsed != 7*time.Second+300*time.Millisecond {
			t.Errorf("RetryError = %+v, want 4 attempts, slept 7s, elapsed 7.3s", re)
		}
		p = p.Copy(retries.WithBefore(func(context.Context, retries.State) {}))
		_, err = runErr(t, t.Context(), p, func(int) error {
			time.Sleep(100 * time.Millisecond)
			return errBoom
		})
		// The same definition holds whatever the options.
		if errors.As(err, &re); re.Elapsed != 7*time.Second+300*time.Millisecond {
			t.Errorf("Elapsed with a before hook = %v, want 7.3s as without", re.Elapsed)
		}
	})
}

func TestDelayStopsCountFromFirstFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.New(retries.WithStop(retries.StopAfterDelay(3*time.Second)), retries.WithWait(retries.WaitFixed(time.Second)))
		s, err := runErr(t, t.Context(), p, func(int) error {
			time.Sleep(500 * time.Millisecond)
			return errBoom
		})
		// Attempts end at 0.5, 2, 3.5 and 5 s, so Elapsed is 0, 1.5, 3 s:
		// the third reaches 3 s.
		if len(s.calls) != 3 || !errors.Is(err, errBoom) {
			t.Errorf("Do() = %v after %d calls, want boom after 3", err, len(s.calls))
		}
		p = p.Copy(retries.WithStop(retries.StopBeforeDelay(3 * time.Second)))
		s, _ = runErr(t, t.Context(), p, func(int) error {
			time.Sleep(500 * time.Millisecond)
			return errBoom
		})
		// After attempt 2 (Elapsed 1.5 s) the next wait ends at 2.5 s; after
		// attempt 3 (Elapsed 3 s), at 4 s.
		if len(s.calls) != 3 {
			t.Errorf("calls with StopBeforeDelay = %d, want 3", len(s.calls))
		}
	})
}

func TestWaitChainInEngine(t *testing.T) { // tenacity test_wait_chain_multiple_invocations
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.New(
			retries.WithStop(retries.StopAfterAttempt(5)),
			retries.WithWait(retries.WaitChain(retries.WaitFixed(time.Second), retries.WaitFixed(2*time.Second), retries.WaitFixed(3*time.Second))),
			retries.WithRetry(retries.RetryIfValue(func(v any) bool { return v == 1 })),
		)
		_, s, err := runValue(t, t.Context(), p, func(int) (int, error) { return 1, nil })
		if want := []time.Duration{1e9, 2e9, 3e9, 3e9}; !slices.Equal(s.sleeps(), want) {
			t.Errorf("sleeps = %v, want %v", s.sleeps(), want)
		}
		if _, ok := err.(*retries.RetryError); !ok {
			t.Errorf("DoValue() = %v, want a RetryError", err)
		}
	})
}

func TestWaitBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.New(
			retries.WithStop(retries.StopNever()),
			retries.WithWait(retries.WaitBackOff(func() backoff.BackOff {
				return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Second), 2)
			})),
		)
		// backoff.Stop after 2 retries ends the call as the policy's stop.
		for range 2 { // a fresh BackOff per call: both calls see the full schedule
			s, err := runErr(t, t.Context(), p, func(int) error { return errBoom })
			var re *retries.RetryError
			if !errors.As(err, &re) || re.Attempts != 3 || !slices.Equal(s.sleeps(), []time.Duration{time.Second, time.Second}) {
				t.Errorf("Do() = %v with sleeps %v, want a RetryError after 3 attempts and 1s, 1s", err, s.sleeps())
			}
		}
	})
}

func TestDiscardsRetriedResponses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var events []string
		var bodies []*trackedBody
		p := always(3, time.Second).Copy(retries.WithRetry(retries.RetryIfStatus(503)))
		start := time.Now()
		resp, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
			for i, b := range bodies {
				if b.closed.Load() {
					events = append(events, fmt.Sprintf("closed%d", i+1))
				}
			}
			events = append(events, fmt.Sprintf("call@%v", time.Since(start)))
			r, b := response(503, strings.Repeat("x", 10<<10))
			bodies = append(bodies, b)
			return r, nil
		})
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Value != resp {
			t.Fatalf("DoValue() = %v, want a RetryError holding the returned response", err)
		}
		// Each retried body is closed after the wait, before the next call;
		// the returned one is not.
		want := "call@0s closed1 call@1s closed1 closed2 call@2s"
		if got := strings.Join(events, " "); got != want {
			t.Errorf("events = %s, want %s", got, want)
		}
		if bodies[2].closed.Load() || bodies[2].read.Load() != 0 {
			t.Error("the returned response's body was read or closed")
		}
		if n := bodies[0].read.Load(); n != 4<<10 {
			t.Errorf("drained %d bytes of a 10 KiB body, want 4 KiB", n)
		}
	})
}

func TestNilArgumentsPanic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"do_nil_fn", func() { _ = retries.Query.Do(context.Background(), nil) }},
		{"dovalue_nil_fn", func() { _, _ = retries.DoValue[int](context.Background(), retries.Query, nil) }},
		{"nil_ctx", func() {
			var ctx context.Context
			_ = retries.Query.Do(ctx, func(context.Context) error { return nil })
		}},
		{"negative_attempts", func() { retries.StopAfterAttempt(-1) }},
		{"negative_delay", func() { retries.StopAfterDelay(-time.Second) }},
		{"negative_fixed", func() { retries.WaitFixed(-1) }},
		{"random_min_over_max", func() { retries.WaitRandom(2*time.Second, time.Second) }},
		{"negative_exponential", func() { retries.WaitExponential(retries.Exponential{Max: -1}) }},
		{"negative_base", func() { retries.WaitRandomExponential(retries.Exponential{Base: -2}) }},
		{"empty_chain", func() { retries.WaitChain() }},
		{"decorrelated_zero_base", func() { retries.WaitDecorrelatedJitter(0, time.Second) }},
		{"nil_wait_func", func() { retries.WaitFunc(nil) }},
		{"nil_backoff", func() { retries.WaitBackOff(nil) }},
		{"nil_error_predicate", func() { retries.RetryIfError(nil) }},
		{"no_is_target", func() { retries.RetryIfErrorIs() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "retries: ") {
					t.Errorf("panic = %q, want a message starting with \"retries: \"", msg)
				}
			}()
			tc.f()
		})
	}
}

func TestNilHooksAreIgnored(t *testing.T) {
	t.Parallel()
	p := always(2, 0).Copy(retries.WithBefore(nil), retries.WithAfter(nil), retries.WithBeforeSleep(nil),
		retries.WithOnExhausted(nil), retries.WithDiscard(nil), nil)
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error { calls++; return errBoom })
	if !errors.Is(err, errBoom) || calls != 2 {
		t.Errorf("Do() = %v after %d calls, want boom after 2", err, calls)
	}
}

// TestConcurrentUse runs package policies and copies from many goroutines
// at once; run it with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.DocV1.Copy(retries.WithWait(retries.WaitRandomExponential(retries.Exponential{Max: 3 * time.Second})))
		var wg sync.WaitGroup
		results := make([]int, 64)
		for g := range results {
			wg.Go(func() {
				q := p
				if g%2 == 0 {
					q = p.Copy(retries.WithStop(retries.StopAfterAttempt(4)))
				}
				calls := 0
				_ = q.Do(t.Context(), func(context.Context) error { calls++; return errBoom })
				results[g] = calls
			})
		}
		wg.Wait()
		for g, calls := range results {
			if want := 3 + (1-g%2)*1; calls != want {
				t.Errorf("goroutine %d made %d calls, want %d", g, calls, want)
			}
		}
	})
}

// TestNoSleepPastDeadlineAfterSlowHook checks that the time a hook takes
// counts when Do decides whether the next wait would pass the deadline.
func TestNoSleepPastDeadlineAfterSlowHook(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		p := always(5, time.Second).Copy(retries.WithAfter(func(context.Context, retries.State) { time.Sleep(time.Second) }))
		start := time.Now()
		s, err := runErr(t, ctx, p, func(int) error { return errBoom })
		// After the hook it is 1 s; the wait would end at 2 s, past 1.5 s.
		if at := time.Since(start); at != time.Second || len(s.calls) != 1 || ctx.Err() != nil {
			t.Errorf("Do returned at %v after %d calls (ctx.Err() %v), want at 1s after 1, before the deadline", at, len(s.calls), ctx.Err())
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBoom) {
			t.Errorf("Do() = %v, want to match DeadlineExceeded and boom", err)
		}
	})
}

// TestErrorAttemptsHaveNoValue checks that the value returned beside an
// error is neither recorded as the outcome nor discarded.
func TestErrorAttemptsHaveNoValue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var discarded, seen []any
		p := always(3, 0).Copy(
			retries.WithDiscard(func(v any) { discarded = append(discarded, v) }),
			retries.WithAfter(func(_ context.Context, s retries.State) { seen = append(seen, s.Value) }),
		)
		_, _, err := runValue(t, t.Context(), p, func(int) (*http.Response, error) { return nil, errBoom })
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Value != nil || re.Err != errBoom {
			t.Fatalf("DoValue() = %v, want a RetryError with boom and a nil Value", err)
		}
		if len(discarded) != 0 || len(seen) != 3 || seen[0] != nil {
			t.Errorf("discarded %v, hooks saw values %v, want nothing discarded and nil values", discarded, seen)
		}
		// A successful nil pointer that is retried is not discarded either.
		p = p.Copy(retries.WithRetry(retries.RetryIfValue(func(any) bool { return true })))
		_, _, _ = runValue(t, t.Context(), p, func(int) (*http.Response, error) { return nil, nil })
		if len(discarded) != 0 {
			t.Errorf("discarded %v, want no nil pointer discarded", discarded)
		}
	})
}

// TestValuePredicatesInDo checks that Do asks predicates that look at
// successes, with a nil value, whatever the policy shares: a first attempt
// that holds a limiter's permit runs on a fast path of its own.
func TestValuePredicatesInDo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shares := map[string][]retries.Option{
			"nothing": nil,
			"limiter": {retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{}))},
			"breaker": {retries.WithBreaker(retries.NewBreaker(retries.BreakerConfig{}))},
			"both": {retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{})),
				retries.WithBreaker(retries.NewBreaker(retries.BreakerConfig{}))},
		}
		for name, opts := range shares {
			var values []any
			p := always(3, 0).Copy(retries.WithRetry(retries.RetryIfValue(func(v any) bool { values = append(values, v); return true })))
			s, err := runErr(t, t.Context(), p.Copy(opts...), func(int) error { return nil })
			var re *retries.RetryError
			if !errors.As(err, &re) || len(s.calls) != 3 || len(values) != 3 || values[0] != nil {
				t.Errorf("sharing %s: Do() = %v after %d calls, predicate saw %v, want a RetryError after 3 calls, 3 nil values", name, err, len(s.calls), values)
			}
		}
		errDone := errors.New("done")
		p := always(10, 0).Copy(retries.WithRetry(retries.RetryNot(retries.RetryIfErrorIs(errDone))))
		s, err := runErr(t, t.Context(), p, func(i int) error {
			if i == 4 {
				return errDone
			}
			return nil
		})
		if err != errDone || len(s.calls) != 5 {
			t.Errorf("Do() = %v after %d calls, want done after 5", err, len(s.calls))
		}
	})
}

// TestSynctestMakesWaitsInstant is the README's testing advice: under
// testing/synctest, DocV1's real waits (1 s, then 2 s) pass at once in the
// bubble's clock, with no policy patched.
func TestSynctestMakesWaitsInstant(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		err := retries.DocV1.Do(t.Context(), func(context.Context) error {
			if calls++; calls < 3 {
				return errors.New("connection reset")
			}
			return nil
		})
		if err != nil || calls != 3 || time.Since(start) != 3*time.Second {
			t.Errorf("Do() = %v after %d calls and %v of the bubble's time, want success after 3 calls and 3s", err, calls, time.Since(start))
		}
	})
}
