package retries_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// fleet runs n independent limiters, each with its own workers, against one
// simulated server for seconds of fake time, and returns each limiter's
// successes per second of the run. It must run inside a synctest bubble.
func fleet(srv server, n, workers, seconds int) [][]int {
	ok := make([][]int, n)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		ok[i] = make([]int, seconds)
		l := retries.NewLimiter(retries.LimiterConfig{})
		for range workers {
			wg.Go(func() {
				for {
					p, err := l.Acquire(ctx)
					if err != nil {
						return
					}
					sig := srv.call()
					p.Release(sig)
					if sec := int(time.Since(start) / time.Second); sig == retries.SignalSuccess && sec < seconds {
						mu.Lock()
						ok[i][sec]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	return ok
}

// jain returns Jain's fairness index over xs: 1 when all are equal, 1/n
// when one has everything.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// TestLimiterFleet: 8 limiters that know nothing of each other, 16 workers
// each, share a server that admits 1000 requests a second. Together they
// keep it busy: each reacts to the server's own backpressure, which all of
// them see. Their shares are logged, not asserted: Jain's index over them
// is 0.4 to 0.9 from run to run, since the limiter whose rate limit
// turns on first keeps the larger share (see docs/limiter.md, "Many feeders").
func TestLimiterFleet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n, seconds, from = 8, 40, 10
		srv := newRateServer(1000, 20, 5*time.Millisecond)
		ok := fleet(srv, n, 16, seconds)
		per := make([]float64, n)
		total := 0.0
		for i := range n {
			for s := from; s < seconds; s++ {
				per[i] += float64(ok[i][s])
			}
			per[i] /= seconds - from
			total += per[i]
		}
		j := jain(per)
		t.Logf("per limiter %.0f /s, together %.0f /s, Jain %.4f", per, total, j)
		if total < 950 {
			t.Errorf("together %.0f successes a second, want at least 950 of 1000", total)
		}
	})
}
