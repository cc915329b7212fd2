package retries_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestZeroBreaker: the zero Breaker works as NewBreaker(BreakerConfig{})
// does. Before, its probe interval was 0: against a server that is down
// it let an attempt through as fast as they came (73 115 in 3 s).
func TestZeroBreaker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b retries.Breaker
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		attempts := 0
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(100000)), retries.WithWait(retries.WaitNone()), retries.WithBreaker(&b))
		_ = p.Do(ctx, func(context.Context) error {
			if attempts++; attempts == 1000 {
				cancel() // a hot loop never lets the clock move
			}
			return errRefused
		})
		// 5 failures, with no success ever, open it; then a probe at 50
		// ms, 100 ms, … up to 1 s apart.
		if attempts > 20 {
			t.Errorf("%d attempts in 3 s through the zero Breaker, want its probes only", attempts)
		}
		if b.State() == retries.BreakerClosed {
			t.Errorf("the zero Breaker did not open")
		}
	})
}

// TestZeroBudget: the zero Budget is valid and refuses every retry, as
// NewBudget(0, 0) does, without spinning its timer.
func TestZeroBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b retries.Budget
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(5)), retries.WithBudget(&b))
		for range 3 {
			attempts := 0
			err := p.Do(t.Context(), func(context.Context) error { attempts++; return errDown })
			if !errors.Is(err, retries.ErrBudgetExhausted) || attempts != 1 {
				t.Errorf("Do() = %v after %d attempts, want ErrBudgetExhausted after 1", err, attempts)
			}
			time.Sleep(time.Second) // the budget's slices go by
		}
	})
}

// TestZeroBudgetWindowSlides: a zero Budget's window of 10 s slides as
// NewBudget's does. Counted from year 1, its slice number saturated and
// never moved: the window held every first attempt ever, and its timer
// fired at once whenever the counts had changed.
func TestZeroBudgetWindowSlides(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b retries.Budget
		p := retries.New(retries.WithBudget(&b))
		call := func() { _ = p.Do(t.Context(), func(context.Context) error { return nil }) }
		for range 5 {
			call()
		}
		time.Sleep(11 * time.Second)
		call()
		if s := b.Stats(); s.Deposits != 1 {
			t.Errorf("window deposits %d, want the 1 of the last 10 s", s.Deposits)
		}
	})
}
