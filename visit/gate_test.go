package visit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// simulate runs eight slices through g against a server that serves
// slots(served) streams at once, each a second, until total are served;
// a refused stream waits 0.2 s. It returns the streams refused and the
// most served at once once slots said more than its first answer.
func simulate(t *testing.T, g *gate, total int, slots func(served int) int) (refused, most int) {
	var mu sync.Mutex
	serving, served, first := 0, 0, slots(0)
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
				if served >= total {
					mu.Unlock()
					g.leave(false, n)
					return
				}
				if serving >= slots(served) {
					refused++
					mu.Unlock()
					g.leave(true, n)
					time.Sleep(200 * time.Millisecond)
					continue
				}
				serving++
				if slots(served) > first {
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
	return refused, most
}

// TestGateLearnsTheServersSlots: eight slices against a server that
// serves three streams at once, each stream a second: the slow start
// meets one 429 at four, and the probes for a slot freed since come ever
// more rarely (six in 120 streams at most), while three run at once
// nearly all the time.
func TestGateLearnsTheServersSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		refused, _ := simulate(t, newGate(8), 120, func(int) int { return 3 })
		elapsed := time.Since(start)
		if refused < 1 || refused > 7 {
			t.Errorf("%d streams refused, want the slow start's one and at most six probes", refused)
		}
		if least := 40 * time.Second; elapsed > least+3*time.Second {
			t.Errorf("120 streams of a second on 3 slots took %v, want about %v", elapsed, least)
		}
	})
}

// TestGateFindsAFreedSlot: a server that serves two visits at once, then
// six once another client has gone: the gate's probes find the four
// places freed, up to the endpoint's eight slices' six.
func TestGateFindsAFreedSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, most := simulate(t, newGate(8), 400, func(served int) int {
			if served < 100 {
				return 2
			}
			return 6
		})
		if most != 6 {
			t.Errorf("at most %d served at once after the server freed four slots, want 6", most)
		}
	})
}
