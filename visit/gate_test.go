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
					n, err := g.enter(t.Context())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if served >= 120 {
						mu.Unlock()
						g.leave(false, n)
						return
					}
					if serving >= 3 {
						refused++
						mu.Unlock()
						g.leave(true, n)
						time.Sleep(200 * time.Millisecond)
						continue
					}
					serving++
					mu.Unlock()
					g.took(n)
					time.Sleep(time.Second)
					mu.Lock()
					serving--
					served++
					mu.Unlock()
					g.leave(false, n)
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

// TestGateFindsAFreedSlot: a server that serves two visits at once, then
// six once another client has gone: the gate's probes find the four
// places freed, up to the endpoint's eight slices' six.
func TestGateFindsAFreedSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(8)
		var mu sync.Mutex
		slots, serving, served := 2, 0, 0
		most := 0 // the most served at once after the change
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					n, err := g.enter(t.Context())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if served >= 400 {
						mu.Unlock()
						g.leave(false, n)
						return
					}
					if served == 100 {
						slots = 6
					}
					if serving >= slots {
						mu.Unlock()
						g.leave(true, n)
						time.Sleep(200 * time.Millisecond)
						continue
					}
					serving++
					if slots == 6 {
						most = max(most, serving)
					}
					mu.Unlock()
					g.took(n)
					time.Sleep(time.Second)
					mu.Lock()
					serving--
					served++
					mu.Unlock()
					g.leave(false, n)
				}
			})
		}
		wg.Wait()
		if most != 6 {
			t.Errorf("at most %d served at once after the server freed four slots, want 6", most)
		}
	})
}
