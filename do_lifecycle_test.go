package retries_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/seed32e55400/retries"
)

// TestNoAttemptAfterContextEndsDuringDiscard ends the context while the
// previous attempt's value is being released: no attempt may start with a
// done context.
func TestNoAttemptAfterContextEndsDuringDiscard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()),
		retries.WithDiscard(func(any) { cancel() }))
	calls := 0
	_, err := retries.DoValue(ctx, p, func(ctx context.Context) (*http.Response, error) {
		calls++
		if ctx.Err() != nil {
			t.Error("an attempt started with a done context")
		}
		r, _ := response(503, "busy")
		return r, nil
	})
	var re *retries.RetryError
	if calls != 1 || !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("DoValue() = %v after %d calls, want a canceled RetryError after 1 attempt", err, calls)
	}
}

// TestPanicInHookReleasesPendingValue panics in the before-sleep hook while
// a retried response is pending: the response is released as the panic
// unwinds, and the panic goes on.
func TestPanicInHookReleasesPendingValue(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{"after", "before sleep", "discard", "wait"} {
		t.Run(hook, func(t *testing.T) {
			t.Parallel()
			boom := func() { panic("hook " + hook) }
			var opts []retries.Option
			switch hook {
			case "after":
				opts = append(opts, retries.WithAfter(func(context.Context, retries.State) { boom() }))
			case "before sleep":
				opts = append(opts, retries.WithBeforeSleep(func(context.Context, retries.State) { boom() }))
			case "wait":
				opts = append(opts, retries.WithWait(retries.WaitFunc(func(retries.State) time.Duration { boom(); return 0 })))
			}
			resp, body := response(503, "busy")
			p := retries.DocV1.Copy(append([]retries.Option{retries.WithWait(retries.WaitNone())}, opts...)...)
			if hook == "discard" {
				// A discard step that panics is itself the release: nothing
				// is left to release, and its panic goes on.
				p = p.Copy(retries.WithDiscard(func(v any) { _ = v.(*http.Response).Body.Close(); boom() }))
			}
			func() {
				defer func() {
					if r := recover(); r != "hook "+hook {
						t.Errorf("recovered %v, want the hook's panic", r)
					}
				}()
				_, _ = retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) { return resp, nil })
			}()
			if !body.closed.Load() {
				t.Error("the pending response was not closed")
			}
		})
	}
}

// TestPanicReleasesLimiterPermit panics in fn and in a predicate while a
// permit is held, with a limiter whose in-flight limit leaves no room for
// its fast path (MaxInFlight 1) and with one far from its limit (the call
// loop's fast path holds the first permit): the limiter has nothing in
// flight afterwards.
func TestPanicReleasesLimiterPermit(t *testing.T) {
	t.Parallel()
	onError := retries.RetryIfError(func(error) bool { panic("predicate") })
	onValue := retries.RetryIfValue(func(any) bool { panic("predicate") })
	for _, cfg := range []retries.LimiterConfig{{MaxInFlight: 1}, {}} {
		l := retries.NewLimiter(cfg)
		base := retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithLimiter(l))
		for i, call := range []func(){
			func() { _ = base.Do(t.Context(), func(context.Context) error { panic("attempt") }) },
			func() {
				_ = base.Copy(retries.WithRetry(onError)).Do(t.Context(), func(context.Context) error { return errBoom })
			},
			func() {
				_, _ = retries.DoValue(t.Context(), base.Copy(retries.WithRetry(onValue)), func(context.Context) (int, error) { return 1, nil })
			},
		} {
			func() {
				defer func() {
					if r := recover(); r == nil {
						t.Errorf("%+v, panic %d: no panic", cfg, i)
					}
				}()
				call()
			}()
			if s := l.Stats(); s.InFlight != 0 {
				t.Fatalf("%+v, after panic %d: %v, want nothing in flight", cfg, i, l)
			}
		}
		// With one slot, a leaked permit would block this call for ever.
		if err := base.Do(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// selfWrapper is an error whose Unwrap returns itself.
type selfWrapper struct{}

func (e *selfWrapper) Error() string { return "self" }
func (e *selfWrapper) Unwrap() error { return e }

// cycle is an error that unwraps, through a join, to an error that
// unwraps back to it.
type cycle struct{ next *cycle }

func (c *cycle) Error() string   { return "cycle" }
func (c *cycle) Unwrap() []error { return []error{c.next, c.next} }

func TestSelfUnwrappingErrorDoesNotSpin(t *testing.T) {
	t.Parallel()
	a := &cycle{}
	a.next = &cycle{next: a}
	for _, err := range []error{&selfWrapper{}, a} {
		var zero retries.Policy
		if got := zero.Do(t.Context(), func(context.Context) error { return err }); !errors.As(got, new(*retries.RetryError)) {
			t.Errorf("zero Policy: Do() = %v, want a RetryError", got)
		}
		calls := 0
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
		_ = p.Do(t.Context(), func(context.Context) error { calls++; return err })
		if calls != 3 {
			t.Errorf("%d calls, want 3", calls)
		}
	}
}

// TestPermanent checks retries.Permanent and backoff v4's; bench/, which may
// depend on backoff v5, checks that v5's Permanent is recognised too.
func TestPermanent(t *testing.T) {
	t.Parallel()
	if retries.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	for name, err := range map[string]error{
		"retries.Permanent":         retries.Permanent(errBoom),
		"backoff v4 Permanent":      backoff.Permanent(errBoom),
		"wrapped retries.Permanent": fmt.Errorf("call: %w", retries.Permanent(errBoom)),
		"joined":                    errors.Join(errOther, retries.Permanent(errBoom)),
	} {
		calls := 0
		got := retries.Query.Do(t.Context(), func(context.Context) error { calls++; return err })
		if calls != 1 || got != errBoom {
			t.Errorf("%s: Do() = %v after %d calls, want boom itself after 1", name, got, calls)
		}
	}
}

type ctxKey struct{}

func TestHooksGetTheCallsContext(t *testing.T) {
	t.Parallel()
	ctx := context.WithValue(t.Context(), ctxKey{}, "trace-7")
	var seen []any
	record := func(ctx context.Context, _ retries.State) { seen = append(seen, ctx.Value(ctxKey{})) }
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)),
		retries.WithBefore(record), retries.WithAfter(record), retries.WithBeforeSleep(record))
	_ = p.Do(ctx, func(context.Context) error { return errBoom })
	// before 1, after 1, before sleep, before 2, after 2.
	if len(seen) != 5 {
		t.Fatalf("hooks ran %d times, want 5", len(seen))
	}
	for i, v := range seen {
		if v != "trace-7" {
			t.Errorf("hook call %d saw %v, want the call's context value", i, v)
		}
	}
}

// TestElapsedIndependentOfOptions runs the same two slow attempts under
// policies that differ only in hooks and stops that look at the clock:
// State.Elapsed and RetryError.Elapsed mean the same under all of them.
func TestElapsedIndependentOfOptions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := retries.New(retries.WithStop(retries.StopAfterAttempt(2)))
		var seen time.Duration
		for name, p := range map[string]retries.Policy{
			"plain":       base,
			"before hook": base.Copy(retries.WithBefore(func(context.Context, retries.State) {})),
			"after hook":  base.Copy(retries.WithAfter(func(_ context.Context, s retries.State) { seen = s.Elapsed })),
			"delay stop":  base.Copy(retries.WithStop(retries.StopAny(retries.StopAfterAttempt(2), retries.StopAfterDelay(time.Hour)))),
			"on exhausted": base.Copy(retries.WithOnExhausted(func(s retries.State) error {
				return &retries.RetryError{Attempts: s.Attempt, Elapsed: s.Elapsed}
			})),
		} {
			err := p.Do(t.Context(), func(context.Context) error {
				time.Sleep(50 * time.Millisecond)
				return errBoom
			})
			var re *retries.RetryError
			if !errors.As(err, &re) || re.Elapsed != 50*time.Millisecond {
				t.Errorf("%s: Do() = %v, want Elapsed 50ms (the second attempt's duration)", name, err)
			}
		}
		if seen != 50*time.Millisecond {
			t.Errorf("the after hook saw Elapsed %v at the second attempt, want 50ms", seen)
		}
	})
}

// TestDoLimiterSignals checks what Do tells a limiter about each outcome.
func TestDoLimiterSignals(t *testing.T) {
	t.Parallel()
	l := retries.NewLimiter(retries.LimiterConfig{})
	// Throttle retries only 429s, as the inner layer of a feed does.
	p := retries.Throttle.Copy(retries.WithLimiter(l))
	for _, code := range []int{200, 404, 502, 429} {
		calls := 0
		_, _ = retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
			calls++
			if code == 429 && calls > 1 {
				code = 200 // the retry succeeds
			}
			r, _ := response(code, "")
			return r, nil
		})
	}
	_ = p.Do(t.Context(), func(context.Context) error { return errBoom }) // not retried, not a status
	// 200, 404 and the retried 429's 200 are successes; the 502 that this
	// layer does not retry is a failure; the 429 is backpressure; boom
	// teaches nothing.
	if s := l.Stats(); s.Successes != 3 || s.Failures != 1 || s.Throttles != 1 || s.InFlight != 0 {
		t.Errorf("Stats() = %+v, want 3 successes, 1 failure, 1 throttle, nothing in flight", s)
	}
}

// TestRetriesAllocateNothing checks that a call that fails twice and then
// succeeds allocates nothing, whatever its wait, when no wait sleeps.
func TestRetriesAllocateNothing(t *testing.T) {
	for name, w := range map[string]retries.Wait{
		"none":         retries.WaitNone(),
		"fixed 0":      retries.WaitFixed(0),
		"incrementing": retries.WaitIncrementing(0, 0, 0),
		"random":       retries.WaitRandom(0, 0),
		"combine":      retries.WaitCombine(retries.WaitFixed(0), retries.WaitRandom(0, 0)),
	} {
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)), retries.WithWait(w))
		ctx := context.Background()
		allocs := testing.AllocsPerRun(100, func() {
			n := 0
			_ = p.Do(ctx, func(context.Context) error {
				if n++; n < 3 {
					return errBoom
				}
				return nil
			})
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, allocs)
		}
	}
}
