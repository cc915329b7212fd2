package retries

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBudgetTimerStopsWhenIdle checks that the timer marking slice starts
// runs while the budget is used and stops itself after a slice with no
// activity, and that the window is right when it starts again.
func TestBudgetTimerStopsWhenIdle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0.5, 0)
		if b.ticking.Load() {
			t.Fatal("a new budget's timer runs, want it stopped until the budget is used")
		}
		for range 10 {
			b.deposit()
			time.Sleep(100 * time.Millisecond)
		}
		if !b.ticking.Load() {
			t.Fatal("the timer is stopped while deposits keep coming")
		}
		time.Sleep(time.Second)
		if b.ticking.Load() {
			t.Fatal("the timer still runs 1 s after the last deposit")
		}
		if got := b.Stats().Deposits; got != 10 {
			t.Errorf("Deposits = %d, want 10", got)
		}
		time.Sleep(9 * time.Second) // the window has left every deposit
		b.deposit()
		if s := b.Stats(); s.Deposits != 1 || !b.ticking.Load() {
			t.Errorf("after 10 s and one more deposit: %+v, timer running %v; want 1 deposit and the timer running", s, b.ticking.Load())
		}
	})
}

// TestBudgetShards checks that deposits from many goroutines are all
// counted, whatever shards their stacks pick.
func TestBudgetShards(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0.1, 0)
		used := map[int]bool{}
		done := make(chan int)
		for range 64 {
			go func() {
				var here byte
				for range 100 {
					b.deposit()
				}
				done <- shardOf(&here)
			}()
		}
		for range 64 {
			used[<-done] = true
		}
		if got := b.Stats().Deposits; got != 6400 {
			t.Errorf("Deposits = %d, want 6400", got)
		}
		if len(used) < budgetShards/2 {
			t.Errorf("64 goroutines used %d of %d shards, want them spread", len(used), budgetShards)
		}
	})
}
