package retries_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// fleet runs n independent limiters, each with its own workers, against one
// simulated server for seconds of fake time, and returns each limiter's
// successes per second of the run, and the backpressure answered from
// second from on. It must run inside a synctest bubble.
func fleet(srv server, n, workers, seconds, from int) (ok [][]int, throttled int) {
	ok = make([][]int, n)
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
					sec := int(time.Since(start) / time.Second)
					mu.Lock()
					switch {
					case sec >= seconds:
					case sig == retries.SignalSuccess:
						ok[i][sec]++
					case sig == retries.SignalBackpressure && sec >= from:
						throttled++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return ok, throttled
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

// fleetShares runs one fleet of n limiters with 16 workers each against a
// server that admits rate requests a second, its answer times drawn from
// ± jitter of their nominal by a generator seeded with seed, and returns
// each limiter's successes per second over seconds [from, seconds), their
// sum, and the share of backpressure then.
func fleetShares(rate, jitter float64, seed uint64, n, seconds, from int) (per []float64, total, throttled float64) {
	srv := newRateServer(rate, 20, 5*time.Millisecond)
	srv.jitter, srv.rng = jitter, rand.New(rand.NewPCG(seed, 0))
	ok, th := fleet(srv, n, 16, seconds, from)
	per = make([]float64, n)
	for i := range n {
		for s := from; s < seconds; s++ {
			per[i] += float64(ok[i][s])
		}
		total += per[i]
		per[i] /= float64(seconds - from)
	}
	return per, total / float64(seconds-from), float64(th) / (total + float64(th))
}

// TestLimiterFleet: 8 limiters that know nothing of each other, 16 workers
// each, share a server that admits 200, 1000 or 2000 requests a second.
// Together they keep it busy, and they share it better than chance: the
// median of Jain's index over several fleets is at least 0.8 at 200/s, 0.65
// at 1000/s and 0.7 at 2000/s when the server answers in exactly 5 ms (the
// limiter before its rate started from what it was sending when its first
// answers were backpressure had medians of 0.77, 0.46 and 0.50), and at
// least 0.9, 0.93 and 0.92 when its answer times vary by ± 25 %, as a real
// server's do, with backpressure at most 3.2 % and 2.8 % on average at 1000
// and 2000/s (3.6 % and 3.2 % before a cut took back the growth since the
// last one). With exact times a limiter whose requests keep pace with the
// server's tokens can starve its peers (docs/limiter.md, "Many feeders").
func TestLimiterFleet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate   float64
		jitter float64 // of the server's answer times
		fleets int
		jain   float64 // the median, at least
		bp     float64 // the mean share of backpressure over the fleets, at most; 0: no bound but 10 % each
	}{
		{200, 0, 7, 0.8, 0},
		{1000, 0, 9, 0.65, 0},
		{2000, 0, 5, 0.7, 0},
		{200, 0.25, 7, 0.9, 0},
		{1000, 0.25, 9, 0.93, 0.032},
		{2000, 0.25, 7, 0.92, 0.028},
	} {
		t.Run(fmt.Sprintf("%v/jitter=%v", tc.rate, tc.jitter), func(t *testing.T) {
			t.Parallel()
			var js []float64
			bp := 0.0
			for seed := range uint64(tc.fleets) {
				synctest.Test(t, func(t *testing.T) {
					const n, seconds, from = 8, 30, 10
					per, total, throttled := fleetShares(tc.rate, tc.jitter, seed, n, seconds, from)
					j := jain(per)
					js = append(js, j)
					bp += throttled / float64(tc.fleets)
					t.Logf("per limiter %.0f /s, together %.0f /s, backpressure %.1f%%, Jain %.4f", per, total, 100*throttled, j)
					if total < 0.95*tc.rate {
						t.Errorf("together %.0f successes a second, want at least %.0f", total, 0.95*tc.rate)
					}
					if throttled > 0.1 {
						t.Errorf("backpressure %.1f%% of attempts, want at most 10%%", 100*throttled)
					}
				})
			}
			slices.Sort(js)
			t.Logf("Jain's index %.3f, backpressure %.2f%% on average", js, 100*bp)
			if tc.bp > 0 && bp > tc.bp {
				t.Errorf("backpressure %.2f%% of attempts on average, want at most %.1f%%", 100*bp, 100*tc.bp)
			}
			if m := js[len(js)/2]; m < tc.jain {
				t.Errorf("Jain's index %.4f, median %.4f; want a median of at least %.2f", js, m, tc.jain)
			}
		})
	}
}
