package ledger_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries/internal/ledger"
)

// TestLoop, in fake time: a Loop commits every Every; a value on Asked
// brings a commit Group after the one before, with what asked meanwhile
// in it; an error is returned once ctx ends, and the commits go on after
// it.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked := make(chan struct{}, 1)
		var at []time.Duration
		start := time.Now()
		boom := errors.New("boom")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- ledger.Loop{Every: time.Second, Group: 10 * time.Millisecond, Asked: asked, Commit: func(context.Context) error {
				at = append(at, time.Since(start))
				if len(at) == 2 {
					return boom
				}
				return nil
			}}.Run(ctx)
		}()
		time.Sleep(2500 * time.Millisecond) // commits at 1 s and 2 s
		asked <- struct{}{}                 // at 2.5 s: a commit at once, the last was 0.5 s ago
		time.Sleep(time.Millisecond)
		asked <- struct{}{} // at 2.501 s: 10 ms after the one before
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, boom) {
			t.Errorf("Run: %v, want the first commit's error", err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 2500 * time.Millisecond, 2510 * time.Millisecond}
		if len(at) != len(want) {
			t.Fatalf("commits at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("commits at %v, want %v", at, want)
				break
			}
		}
	})
}
