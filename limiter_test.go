package retries_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestLimiterConverges runs 64 workers against simulated servers of both
// kinds, a rate limiter and a concurrency limit with and without a queue,
// and checks that after five seconds the throughput is close to the
// server's capacity, backpressure stays a small share, and no call waits
// long for its permit.
func TestLimiterConverges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		srv         func() server
		capacity    float64 // requests per second
		minGoodput  float64 // share of capacity, over seconds 5–20
		maxThrottle float64 // share of requests, over seconds 5–20
	}{
		// answers in 1 ms: 500/s needs half a request in flight
		{"rate_limit_500", func() server { return newRateServer(500, 20, time.Millisecond) }, 500, 0.97, 0.04},
		{"rate_limit_1500", func() server { return newRateServer(1500, 20, time.Millisecond) }, 1500, 0.97, 0.04},
		{"rate_limit_20", func() server { return newRateServer(20, 1, time.Millisecond) }, 20, 0.85, 0.10},
		{"slots_12_queue_24", func() server {
			return &slotServer{k: 12, queue: 24, service: 8 * time.Millisecond, net: time.Millisecond}
		}, 1500, 0.97, 0.02},
		{"slots_16_queue_32", func() server {
			return &slotServer{k: 16, queue: 32, service: 10 * time.Millisecond, net: time.Millisecond}
		}, 1600, 0.97, 0.02},
		// A wall gives no place to wait: each slot idles while its next
		// request crosses the network, so K in flight carry K/(service +
		// net), and with service times that vary a K+1st meets
		// backpressure more often than it finds a slot just freed.
		{"slots_12_wall", func() server {
			return &slotServer{k: 12, service: 8 * time.Millisecond, net: time.Millisecond, jitter: 0.25, rng: rand.New(rand.NewPCG(1, 2))}
		}, 12 / 0.009, 0.97, 0.04},
		{"slots_16_wall", func() server {
			return &slotServer{k: 16, service: 10 * time.Millisecond, net: time.Millisecond, jitter: 0.25, rng: rand.New(rand.NewPCG(3, 4))}
		}, 16 / 0.011, 0.97, 0.04},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{})
				r := drive(t, l, tc.srv(), 64, 20, nil)
				perSecond, throttled := r.share(5, 20)
				if perSecond < tc.minGoodput*tc.capacity || throttled > tc.maxThrottle {
					r.log(t)
					t.Errorf("after 5 s: %.0f/s (%.3f of capacity %g), backpressure %.2f%%; want ≥ %g of capacity, ≤ %g%%",
						perSecond, perSecond/tc.capacity, tc.capacity, 100*throttled, tc.minGoodput, 100*tc.maxThrottle)
				}
				// FIFO: a call waits about one round of the 64 workers
				if bound := max(time.Second, time.Duration(3*64/tc.capacity*float64(time.Second))); r.maxWait > bound {
					t.Errorf("longest Acquire = %v, want ≤ %v (64 workers)", r.maxWait, bound)
				}
				if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 {
					t.Errorf("after the run: Stats() = %+v, want nothing in flight or waiting", s)
				}
			})
		})
	}
}

// TestLimiterStartsFull: against a server whose wall is a count in flight,
// with a queue in front of its slots or none, the first backpressure ends
// slow start without starving the feed. Before, it turned a rate limit on
// at the admitted rate, smoothed over a ramp that had just begun, and the
// rate bound for up to a second: medians of 0.91 of the queue store's
// capacity in the first second, and 0.61–0.64 of what the wall's slots
// carry (0.975 and about 0.91 now).
func TestLimiterStartsFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		srv      func(seed uint64) server
		capacity float64 // requests per second
		min      float64 // in the first second, the share of capacity, at least
	}{
		{"slots_12_queue_24", func(uint64) server {
			return &slotServer{k: 12, queue: 24, service: 8 * time.Millisecond, net: 500 * time.Microsecond}
		}, 1500, 0.95},
		{"slots_12_wall", func(seed uint64) server {
			return &slotServer{k: 12, service: 8 * time.Millisecond, net: time.Millisecond, jitter: 0.25, rng: rand.New(rand.NewPCG(seed, 1))}
		}, 12 / 0.009, 0.88},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var firsts []float64
			for seed := range uint64(6) {
				synctest.Test(t, func(t *testing.T) {
					l := retries.NewLimiter(retries.LimiterConfig{})
					r := drive(t, l, tc.srv(seed), 64, 1, nil)
					firsts = append(firsts, float64(r.ok[0])/tc.capacity)
				})
			}
			slices.Sort(firsts)
			t.Logf("first second, of capacity: %.3f", firsts)
			if m := firsts[len(firsts)/2]; m < tc.min {
				t.Errorf("first second: %.3f of capacity, median %.3f; want a median of at least %.2f", firsts, m, tc.min)
			}
		})
	}
}

// TestLimiterWallAfterOvershoot: slow start overshoots a wall of 512
// slots, and requests overtake one another on their way (a delay of up to
// 5 ms), so the server counts more in flight than the client did when it
// granted a request. Backpressure for the overshoot is no evidence of a
// wall: from the client, the wall is the 512 slots and the requests on
// their way (about 2.6 ms of a 22.6 ms round trip), about 570, and the
// limit must reach it within the wall's bucket (1/32 below it) in all
// seeds but one, at most (the server's count varies with the delays, so a
// wall may be seen below it at steady state too, rarely). A wall taken
// from the overshoot's counts held the limit at 543.5 in three or four
// seeds of eight, until its evidence decayed (wallMemory).
//
// The limit, not the count in flight at the end of each second: the rate
// limit that backpressure turns on oscillates around the server's rate,
// and a snapshot taken while it binds counted 490–544 in flight under a
// limit of 559–597, with the seconds' throughput at capacity all the same
// (two seeds of eight, once, in a loaded run of the whole package).
func TestLimiterWallAfterOvershoot(t *testing.T) {
	t.Parallel()
	const want = 553 // 512 × (1 + 2.6/22.6) × 31/32
	var medians []float64
	for seed := range uint64(8) {
		synctest.Test(t, func(t *testing.T) {
			srv := &slotServer{k: 512, service: 20 * time.Millisecond, net: 200 * time.Microsecond, overtake: 5 * time.Millisecond,
				jitter: 0.1, rng: rand.New(rand.NewPCG(seed, 7))}
			l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 4096})
			r := drive(t, l, srv, 1024, 4, nil)
			var limits []float64
			for _, s := range r.stats[1:] {
				limits = append(limits, s.Limit)
			}
			slices.Sort(limits)
			median := limits[len(limits)/2]
			medians = append(medians, median)
			if median < want {
				ok, _ := r.share(1, 4)
				r.log(t)
				t.Logf("seed %d: limit median %.1f, %.0f/s from 1 s to 4 s", seed, median, ok)
			}
		})
	}
	slices.Sort(medians)
	t.Logf("the limit from 1 s to 4 s, medians of seconds by seed: %.1f", medians)
	if medians[1] < want {
		t.Errorf("the limit from 1 s to 4 s: medians %.1f by seed; want all but one at least %d", medians, want)
	}
}

// TestLimiterRecovers doubles the server's capacity at 10 s and halves it
// back at 20 s: throughput must follow the doubling within three seconds
// (six at a wall, whose cap holds until its evidence decays: wallMemory is
// 4 s), and backpressure must subside within two seconds of the halving.
func TestLimiterRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		srv      func() server
		capacity float64
		change   func(s server, double bool)
		follow   int // seconds after the doubling
	}{
		{"rate_limit", func() server { return newRateServer(500, 20, time.Millisecond) }, 500, func(s server, double bool) {
			s.(*rateServer).setRate(map[bool]float64{true: 1000, false: 500}[double])
		}, 3},
		// K slots in flight carry K/(service + net) at a wall (see
		// TestLimiterConverges).
		{"slots_wall", func() server {
			return &slotServer{k: 12, service: 8 * time.Millisecond, net: time.Millisecond, jitter: 0.25, rng: rand.New(rand.NewPCG(5, 6))}
		}, 12 / 0.009, func(s server, double bool) { s.(*slotServer).setSlots(map[bool]int{true: 24, false: 12}[double]) }, 6},
		{"slots_queue", func() server {
			return &slotServer{k: 12, queue: 24, service: 8 * time.Millisecond, net: time.Millisecond}
		}, 1500, func(s server, double bool) { s.(*slotServer).setSlots(map[bool]int{true: 24, false: 12}[double]) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The order in which the bubble's goroutines run varies from
			// run to run, and so does a trajectory: at the wall, about one
			// in 15 stayed near the old limit for the whole window. The
			// median of three runs must meet each bound.
			var doubled, halved, throttle []float64
			for range 3 {
				synctest.Test(t, func(t *testing.T) {
					l := retries.NewLimiter(retries.LimiterConfig{})
					s := tc.srv()
					r := drive(t, l, s, 64, 30, map[int]func(){
						10: func() { tc.change(s, true) },
						20: func() { tc.change(s, false) },
					})
					got, _ := r.share(10+tc.follow, 20)
					back, throttled := r.share(22, 30)
					doubled, halved, throttle = append(doubled, got), append(halved, back), append(throttle, throttled)
				})
			}
			median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
			if got := median(doubled); got < 0.9*2*tc.capacity {
				t.Errorf("%d–10 s after doubling: %.0f/s (median of %.0f), want ≥ %.0f", tc.follow, got, doubled, 0.9*2*tc.capacity)
			}
			if got, throttled := median(halved), median(throttle); got < 0.9*tc.capacity || throttled > 0.04 {
				t.Errorf("2–10 s after halving: %.0f/s (median of %.0f), backpressure %.2f%%; want ≥ %.0f/s, ≤ 4%%", got, halved, 100*throttled, 0.9*tc.capacity)
			}
		})
	}
}

// TestLimiterFloor runs 64 workers against a server that pushes back on
// everything: the limiter must pace them down to about its floor rate,
// never a hot loop.
func TestLimiterFloor(t *testing.T) {
	t.Parallel()
	for _, minRate := range []float64{0, 5} {
		t.Run(map[float64]string{0: "default", 5: "min_rate_5"}[minRate], func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{MinRate: minRate})
				floor := max(minRate, 1)
				s := &alwaysBusy{start: time.Now(), latency: time.Millisecond}
				drive(t, l, s, 64, 120, nil)
				late := 0
				for _, c := range s.calls {
					if c >= 60*time.Second {
						late++
					}
				}
				// 60 s at about the floor
				if max := int(60 * 2 * floor); late > max {
					t.Errorf("calls in the last 60 s = %d, want ≤ %d (floor %g/s)", late, max, floor)
				}
				if total := len(s.calls); total > 1000+int(120*2*floor) {
					t.Errorf("calls in 120 s = %d: not paced", total)
				}
				if st := l.Stats(); st.Rate < floor || st.Rate > 2*floor {
					t.Errorf("Stats().Rate = %g, want within [%g, %g]", st.Rate, floor, 2*floor)
				}
			})
		})
	}
}

// TestLimiterFIFO checks that waiters are granted permits in the order
// they arrived.
func TestLimiterFIFO(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
		ctx := context.Background()
		held, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				p, err := l.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				p.Release(retries.SignalSuccess)
			})
			synctest.Wait() // goroutine i is queued before i+1 starts
		}
		if got := l.Stats().Waiting; got != 10 {
			t.Errorf("Stats().Waiting = %d, want 10", got)
		}
		held.Release(retries.SignalSuccess)
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("grant order = %v, want 0…9", order)
			}
		}
	})
}

// TestLimiterCancel checks that a call whose context ends while it waits
// gets the context's error and leaves nothing behind: it is no longer
// counted as waiting, holds no permit, and the next waiter is served.
func TestLimiterCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// releaseAt is when the held permit is released, relative to the
		// waiter's deadline of 1 s.
		releaseAt time.Duration
	}{
		{"deadline_first", 2 * time.Second},
		{"same_instant", time.Second}, // the grant and the deadline race
		{"release_first", 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
				held, err := l.Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(tc.releaseAt, func() { held.Release(retries.SignalIgnore) })
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				p, err := l.Acquire(ctx)
				switch {
				case err == nil:
					if tc.releaseAt > time.Second {
						t.Errorf("Acquire() = nil error, want the context's")
					}
					p.Release(retries.SignalIgnore)
				case !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("Acquire() = %v, want %v", err, context.DeadlineExceeded)
				case tc.releaseAt < time.Second:
					t.Errorf("Acquire() = %v, want a permit", err)
				}
				if s := l.Stats(); s.Waiting != 0 {
					t.Errorf("after Acquire: Stats().Waiting = %d, want 0", s.Waiting)
				}
				time.Sleep(3 * time.Second)
				if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 {
					t.Errorf("in the end: Stats() = %+v, want nothing in flight or waiting", s)
				}
				// The permit is not leaked: the limit of 1 can be taken again.
				q, err := l.Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				q.Release(retries.SignalSuccess)
			})
		})
	}
}

// TestLimiterDoneContext checks that Acquire with a context that has
// already ended returns its error at once, even with a permit free.
func TestLimiterDoneContext(t *testing.T) {
	t.Parallel()
	l := retries.NewLimiter(retries.LimiterConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(done ctx) = %v, want %v", err, context.Canceled)
	}
	if s := l.Stats(); s.InFlight != 0 {
		t.Errorf("Stats().InFlight = %d, want 0", s.InFlight)
	}
}

// TestLimiterCancelUnderLoad cancels many waiters at random while 64
// workers run against a server, and checks that no permit or waiter is
// left behind.
func TestLimiterCancelUnderLoad(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		srv := newRateServer(200, 5, time.Millisecond)
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				for j := range 50 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(i*7+j*13)%50)*time.Millisecond)
					p, err := l.Acquire(ctx)
					cancel()
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("Acquire() = %v, want %v", err, context.DeadlineExceeded)
						}
						continue
					}
					p.Release(srv.call())
				}
			})
		}
		wg.Wait()
		if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 {
			t.Errorf("Stats() = %+v, want nothing in flight or waiting", s)
		}
	})
}

// TestLimiterPolicyDo runs Throttle with a limiter against a rate-limited
// server from 64 goroutines: every call gets through, the limiter (not
// Throttle's random waits of up to 10 s) paces the retries after a 429, and
// little is wasted.
func TestLimiterPolicyDo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		p := retries.Throttle.Copy(retries.WithLimiter(l))
		srv := newRateServer(200, 5, time.Millisecond)
		start := time.Now()
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 30 {
					err := p.Do(context.Background(), func(context.Context) error {
						if srv.call() == retries.SignalBackpressure {
							return &retries.StatusError{StatusCode: 429}
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		s := l.Stats()
		// 1920 calls at 200/s take 9.6 s
		if elapsed > 11*time.Second {
			t.Errorf("1920 calls at 200/s took %v, want ≤ 11s; %v", elapsed, l)
		}
		if share := float64(s.Throttles) / float64(s.Successes+s.Throttles); s.Successes != 64*30 || share > 0.05 {
			t.Errorf("Stats() = %+v: want 1920 successes, ≤ 5%% throttled", s)
		}
	})
}

// TestLimiterSignals checks what each Signal counts, and String.
func TestLimiterSignals(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		ctx := context.Background()
		// The first backpressure ends slow start, and the second, for an
		// attempt sent after that cut, turns the rate limit on.
		for _, s := range []retries.Signal{retries.SignalSuccess, retries.SignalSuccess, retries.SignalBackpressure, retries.SignalBackpressure, retries.SignalFailure, retries.SignalIgnore} {
			p, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			p.Release(s)
		}
		s := l.Stats()
		if s.Successes != 2 || s.Throttles != 2 || s.Failures != 1 || s.InFlight != 0 || s.Rate == 0 {
			t.Errorf("Stats() = %+v, want 2 successes, 2 throttles, 1 failure, a rate limit on", s)
		}
		str := l.String()
		for _, want := range []string{"Limiter(limit=", "rate=", "in flight=0", "waiting=0", "2 ok, 2 throttled, 1 failed"} {
			if !strings.Contains(str, want) {
				t.Errorf("String() = %q, want it to contain %q", str, want)
			}
		}
		if got := retries.SignalBackpressure.String(); got != "SignalBackpressure" {
			t.Errorf("SignalBackpressure.String() = %q", got)
		}
		var zero retries.Permit
		zero.Release(retries.SignalSuccess) // does nothing
	})
}

// TestLimiterNoAllocs checks that an uncontended Acquire and Release
// allocate nothing.
func TestLimiterNoAllocs(t *testing.T) {
	l := retries.NewLimiter(retries.LimiterConfig{})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := l.Acquire(ctx)
		p.Release(retries.SignalSuccess)
	}); n != 0 {
		t.Errorf("Acquire+Release allocates %v times, want 0", n)
	}
}

// TestLimiterZero checks that the zero Limiter works as NewLimiter's
// default.
func TestLimiterZero(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var l retries.Limiter
		for range 10 {
			p, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p.Release(retries.SignalSuccess)
		}
		if s := l.Stats(); s.Successes != 10 || s.Limit != 4 {
			t.Errorf("Stats() = %+v, want 10 successes and the initial limit of 4", s)
		}
	})
}

// TestLimiterInitialInFlight: a Limiter starts at InitialInFlight, not
// above MaxInFlight: that many attempts go at once, and the next waits.
func TestLimiterInitialInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ max, initial, want int }{{0, 0, 4}, {0, 16, 16}, {8, 16, 8}} {
		synctest.Test(t, func(t *testing.T) {
			l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: tc.max, InitialInFlight: tc.initial})
			var held []retries.Permit
			for range tc.want {
				p, err := l.Acquire(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, p)
			}
			go func() {
				if p, err := l.Acquire(t.Context()); err == nil {
					p.Release(retries.SignalSuccess)
				}
			}()
			synctest.Wait()
			if s := l.Stats(); s.Limit != float64(tc.want) || s.InFlight != tc.want || s.Waiting != 1 {
				t.Errorf("MaxInFlight %d, InitialInFlight %d: limit %g, %d in flight, %d waiting; want %d, %d and 1",
					tc.max, tc.initial, s.Limit, s.InFlight, s.Waiting, tc.want, tc.want)
			}
			for _, p := range held {
				p.Release(retries.SignalIgnore)
			}
		})
	}
}

// TestNewLimiterPanics checks that impossible configurations panic at
// construction.
func TestNewLimiterPanics(t *testing.T) {
	t.Parallel()
	for _, c := range []retries.LimiterConfig{{MaxInFlight: -1}, {InitialInFlight: -1}, {MinRate: -1}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "retries: NewLimiter") {
					t.Errorf("NewLimiter(%+v) panic = %v, want a retries: NewLimiter panic", c, r)
				}
			}()
			retries.NewLimiter(c)
		}()
	}
}

// TestLimiterHoldsOnLatency runs 64 workers against a server with 12 slots
// of 8 ms and a queue of 1000: it never pushes back, so only rising latency
// can tell the limiter to stop growing. The queue must stay short and the
// throughput at capacity; a trial of a step 25 % higher (see climb) may
// lift the count in flight now and then, and must be undone, since the
// step delivers nothing more.
//
// A server that answers in about a millisecond, with 4 slots and an
// endless queue, holds the limiter too: it shrinks past twice the
// baseline plus 2 ms (4.4 ms, a queue of about 13), and the trials' steps
// add a few. 128 workers alone would queue 124.
func TestLimiterHoldsOnLatency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		srv          *slotServer
		workers      int
		capacity     float64 // per second
		median, most int     // the counts in flight allowed
	}{
		// 12 in service, 12 × 1 ms / 8 ms on the network, and a short
		// queue; 64 workers would queue 50.
		{"8ms", &slotServer{k: 12, queue: 1000, service: 8 * time.Millisecond, net: time.Millisecond}, 64, 1500, 40, 50},
		{"1ms", &slotServer{k: 4, queue: 1000, service: time.Millisecond, net: 200 * time.Microsecond}, 128, 4000, 26, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{})
				r := drive(t, l, tc.srv, tc.workers, 20, nil)
				perSecond, _ := r.share(5, 20)
				median, most := r.inFlight(5)
				if perSecond < 0.97*tc.capacity || median > tc.median || most > tc.most {
					r.log(t)
					t.Errorf("after 5 s: %.0f/s, %d in flight (median of seconds), up to %d; want ≥ %.0f/s, ≤ %d and ≤ %d",
						perSecond, median, most, 0.97*tc.capacity, tc.median, tc.most)
				}
			})
		})
	}
}

// TestLimiterRetryAfter: a server that answers 429 with Retry-After: 2
// from 1 s to 7 s is sent almost nothing in that time by 16 goroutines
// sharing a limiter: after the attempts in flight when it began, one probe
// every 2 s. A Retry-After of an hour holds it back 10 s, not an hour.
func TestLimiterRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, header string
		probes       []time.Duration // when the attempts after the first answer start, to the millisecond
	}{
		// Each attempt takes 1 ms, and a hold starts when its answer comes.
		{"2s", "2", []time.Duration{3001 * time.Millisecond, 5002 * time.Millisecond, 7003 * time.Millisecond}},
		{"capped", "3600", []time.Duration{11001 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var mu sync.Mutex
				var after []time.Duration // the attempts after the spell's first answer
				throttle := &retries.StatusError{StatusCode: 429, Header: http.Header{"Retry-After": {tc.header}}}
				call := func(context.Context) error {
					at := time.Since(start)
					if at > time.Second {
						mu.Lock()
						after = append(after, at.Truncate(time.Millisecond))
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
					if at >= time.Second && at < 7*time.Second {
						return throttle
					}
					return nil
				}
				l := retries.NewLimiter(retries.LimiterConfig{})
				p := retries.Throttle.Copy(retries.WithLimiter(l))
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						for time.Since(start) < 7*time.Second {
							if err := p.Do(t.Context(), call); err != nil {
								t.Errorf("Do() = %v", err)
								return
							}
						}
					})
				}
				wg.Wait()
				// The first probe after each hold; then, once the spell is
				// over, every goroutine's last call.
				n := len(tc.probes)
				if len(after) < n || !slices.Equal(after[:n], tc.probes) {
					t.Errorf("attempts after 1 s start at %v, want %v first", after, tc.probes)
				}
			})
		})
	}
}

// TestLimiterFollowsStepUp: against a rate limiter that admits 1000/s,
// halved at 5 s and raised to 1500/s at 10 s (the arena's capacity steps),
// the limiter follows the step up within about a second: a silence long
// for this server makes its growth accelerate at once.
func TestLimiterFollowsStepUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		s := newRateServer(1000, 20, time.Millisecond)
		r := drive(t, l, s, 64, 14, map[int]func(){
			5:  func() { s.setRate(500) },
			10: func() { s.setRate(1500) },
		})
		t.Logf("seconds 10-13 after the step: %v", r.ok[10:14])
		if got, _ := r.share(11, 12); got < 0.9*1500 {
			r.log(t)
			t.Errorf("1–2 s after the step up: %.0f/s, want ≥ %.0f", got, 0.9*1500)
		}
		if got, throttled := r.share(11, 14); throttled > 0.05 {
			t.Errorf("after the step up: %.0f/s with %.1f%% backpressure, want ≤ 5%%", got, 100*throttled)
		}
	})
}

// TestLimiterFirstAnswersBackpressure: a limiter whose first answers are all
// backpressure (its peers hold the server's whole rate when it starts)
// starts its rate limit from the rate it was sending at, not from the floor
// of one attempt a second, which it would take minutes to climb from.
func TestLimiterFirstAnswersBackpressure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		s := newRateServer(1000, 20, 5*time.Millisecond)
		s.tokens = 0 // nothing left of the burst
		r := drive(t, l, s, 16, 5, nil)
		if got, _ := r.share(2, 5); got < 0.9*1000 {
			r.log(t)
			t.Errorf("seconds 2 to 5: %.0f/s, want ≥ %.0f", got, 0.9*1000)
		}
	})
}
