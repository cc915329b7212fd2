package visit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestGateLearnsTheServersSlots: eight slices against a server that
// serves three streams at once, each stream a second: the slow start
// meets one 429 at four, and the probes for a slot freed since come ever
// more rarely (six in 120 streams at most), while three run at once
// nearly all the time.
func TestGateLearnsTheServersSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(8)
		var mu sync.Mutex
		serving, refused, served := 0, 0, 0
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					if err := g.enter(t.Context()); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if served >= 120 {
						mu.Unlock()
						g.leave(false)
						return
					}
					if serving >= 3 {
						refused++
						mu.Unlock()
						g.leave(true)
						time.Sleep(200 * time.Millisecond)
						continue
					}
					serving++
					mu.Unlock()
					g.took()
					time.Sleep(time.Second)
					mu.Lock()
					serving--
					served++
					mu.Unlock()
					g.leave(false)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		if refused < 1 || refused > 7 {
			t.Errorf("%d streams refused, want the slow start's one and at most six probes", refused)
		}
		if min := 40 * time.Second; elapsed > min+3*time.Second {
			t.Errorf("120 streams of a second on 3 slots took %v, want about %v", elapsed, min)
		}
		t.Logf("%d refused, %v", refused, elapsed)
	})
}
