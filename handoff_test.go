package retries_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestHandPermitFirstAttempt: a permit handed to a call is its first
// attempt's, where the limiter has no other to give (one in flight at
// most: acquiring another would wait for ever, which synctest reports);
// the retry acquires its own, and the hand-over's end releases nothing
// more.
func TestHandPermitFirstAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
		p, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, done := retries.HandPermit(t.Context(), p)
		pol := retries.New(retries.WithLimiter(l), retries.WithWait(retries.WaitFixed(0)), retries.WithStop(retries.StopAfterAttempt(3)))
		var inFlight []int
		err = pol.Do(ctx, func(context.Context) error {
			inFlight = append(inFlight, l.Stats().InFlight)
			if len(inFlight) == 1 {
				return errors.New("once")
			}
			return nil
		})
		done()
		done()
		s := l.Stats()
		if err != nil || len(inFlight) != 2 || inFlight[0] != 1 || inFlight[1] != 1 {
			t.Errorf("Do = %v, in flight during its attempts %v; want nil, [1 1]", err, inFlight)
		}
		if s.InFlight != 0 || s.Failures != 1 || s.Successes != 1 {
			t.Errorf("after the call: %d in flight, %d failures, %d successes; want 0, 1, 1", s.InFlight, s.Failures, s.Successes)
		}
	})
}

// TestHandPermitUnused: a permit no attempt took is released when the
// hand-over ends, once; a call by a policy with another limiter leaves it.
func TestHandPermitUnused(t *testing.T) {
	l, other := retries.NewLimiter(retries.LimiterConfig{}), retries.NewLimiter(retries.LimiterConfig{})
	p, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, done := retries.HandPermit(t.Context(), p)
	var during [2]int
	err = retries.New(retries.WithLimiter(other)).Do(ctx, func(context.Context) error {
		during = [2]int{l.Stats().InFlight, other.Stats().InFlight}
		return nil
	})
	if err != nil || during != [2]int{1, 1} {
		t.Errorf("Do with another limiter = %v, in flight (handed, other) %v; want nil, [1 1]", err, during)
	}
	done()
	done()
	if n := l.Stats().InFlight; n != 0 {
		t.Errorf("after the hand-over: %d in flight, want 0", n)
	}
	if _, done := retries.HandPermit(t.Context(), retries.Permit{}); done == nil {
		t.Error("HandPermit of a zero Permit returned a nil done")
	}
}

// TestHandPermitBreakerOpen: a call whose breaker is open gives the handed
// permit back before it waits, so that the limiter counts nothing in
// flight while the outage holds it; the probe it becomes acquires its own.
func TestHandPermitBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{Window: 2, Failures: 2, MaxProbeInterval: time.Second})
		l := retries.NewLimiter(retries.LimiterConfig{})
		pol := retries.New(retries.WithLimiter(l), retries.WithBreaker(b), retries.WithStop(retries.StopAfterAttempt(1)))
		for range 2 {
			// The failure that opens it is an outage's: the call would
			// wait the outage out, so it gets a millisecond.
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			_ = pol.Do(ctx, func(context.Context) error { return errors.New("down") })
			cancel()
		}
		if b.State() == retries.BreakerClosed {
			t.Fatal("the breaker did not open")
		}
		p, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, done := retries.HandPermit(t.Context(), p)
		var during atomic.Int64
		result := make(chan error)
		go func() {
			result <- pol.Do(ctx, func(context.Context) error {
				during.Store(int64(l.Stats().InFlight))
				return nil
			})
		}()
		synctest.Wait() // the call waits at the breaker
		if n := l.Stats().InFlight; n != 0 {
			t.Errorf("while the call waits at the open breaker: %d in flight, want 0", n)
		}
		if err := <-result; err != nil || during.Load() != 1 {
			t.Errorf("Do = %v with %d in flight during its attempt; want nil, 1", err, during.Load())
		}
		done()
		if n := l.Stats().InFlight; n != 0 {
			t.Errorf("after the call: %d in flight, want 0", n)
		}
	})
}

// TestHandPermitSlowStart: a dispatcher that takes the permits and hands
// them to its calls catches up in a burst after each wait, granted below
// the limit by count; slow start must still grow the limit about as fast
// as for calls that each wait for their own, from 4 to the maximum of 1024
// within 200 ms of 10 ms round trips, in every one of 5 runs (the runs vary
// with the order the goroutines run in). Counted by the grants' counts
// alone, some of every 5 runs stayed below it (318 to 677), and under the
// race detector all (46 to 74).
func TestHandPermitSlowStart(t *testing.T) {
	var limits []float64
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1024})
			pol := retries.New(retries.WithLimiter(l))
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			for {
				p, err := l.Acquire(ctx)
				if err != nil {
					break
				}
				call, done := retries.HandPermit(context.Background(), p)
				wg.Go(func() {
					defer done()
					_ = pol.Do(call, func(context.Context) error {
						time.Sleep(10 * time.Millisecond)
						return nil
					})
				})
			}
			limits = append(limits, l.Stats().Limit)
			wg.Wait()
		})
	}
	slices.Sort(limits)
	t.Logf("limits after 200 ms: %.0f", limits)
	if limits[0] < 1024 {
		t.Errorf("limits after 200 ms: %.0f; want 1024 in every run", limits)
	}
}
