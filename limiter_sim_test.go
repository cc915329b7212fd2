package retries_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// The simulated servers below run inside a synctest bubble: they take fake
// time with time.Sleep, so a run of twenty seconds takes a fraction of one.

// server is a simulated server: call makes one request and returns what it
// tells the limiter.
type server interface {
	call() retries.Signal
}

// rateServer admits rate requests a second (a token bucket of burst
// tokens, as nginx's limit_req) and answers backpressure beyond that. An
// admitted request takes latency; backpressure comes back after latency/4.
// With jitter set, each answer's time is drawn from ± jitter of that, by
// rng.
type rateServer struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	tokens  float64
	at      time.Time
	latency time.Duration
	jitter  float64
	rng     *rand.Rand
}

func newRateServer(rate float64, burst float64, latency time.Duration) *rateServer {
	return &rateServer{rate: rate, burst: burst, tokens: burst, at: time.Now(), latency: latency}
}

func (s *rateServer) setRate(r float64) {
	s.mu.Lock()
	s.rate = r
	s.mu.Unlock()
}

func (s *rateServer) call() retries.Signal {
	s.mu.Lock()
	now := time.Now()
	s.tokens = math.Min(s.burst, s.tokens+s.rate*now.Sub(s.at).Seconds())
	s.at = now
	ok := s.tokens >= 1
	if ok {
		s.tokens--
	}
	d := s.latency
	if s.jitter > 0 {
		d = time.Duration(float64(d) * (1 - s.jitter + 2*s.jitter*s.rng.Float64()))
	}
	s.mu.Unlock()
	if !ok {
		time.Sleep(d / 4)
		return retries.SignalBackpressure
	}
	time.Sleep(d)
	return retries.SignalSuccess
}

// slotServer serves k requests at a time, service each, with up to queue
// more waiting for a slot (FIFO); beyond that it answers backpressure at
// once. Every request also spends net on the network, half each way. With
// jitter set, each service time is drawn from ± jitter of service, by rng.
type slotServer struct {
	mu      sync.Mutex
	k       int
	active  int
	waiting []chan struct{}
	queue   int
	service time.Duration
	net     time.Duration
	jitter  float64
	rng     *rand.Rand
	// overtake, with rng, delays each request on its way by up to this
	// (uniformly drawn), so that one sent later may arrive first, as
	// requests over several connections, or through a proxy that opens
	// connections as it goes, do.
	overtake time.Duration
}

func (s *slotServer) setSlots(k int) {
	s.mu.Lock()
	s.k = k
	for s.active < s.k && len(s.waiting) > 0 {
		close(s.waiting[0])
		s.waiting = s.waiting[1:]
		s.active++
	}
	s.mu.Unlock()
}

func (s *slotServer) call() retries.Signal {
	way := s.net / 2
	if s.overtake > 0 {
		s.mu.Lock()
		way += time.Duration(s.rng.Int64N(int64(s.overtake)))
		s.mu.Unlock()
	}
	time.Sleep(way)
	s.mu.Lock()
	switch {
	case s.active < s.k:
		s.active++
		s.mu.Unlock()
	case len(s.waiting) < s.queue:
		ch := make(chan struct{})
		s.waiting = append(s.waiting, ch)
		s.mu.Unlock()
		<-ch
	default:
		s.mu.Unlock()
		time.Sleep(s.net / 2)
		return retries.SignalBackpressure
	}
	d := s.service
	if s.jitter > 0 {
		s.mu.Lock()
		d = time.Duration(float64(d) * (1 - s.jitter + 2*s.jitter*s.rng.Float64()))
		s.mu.Unlock()
	}
	time.Sleep(d)
	s.mu.Lock()
	if len(s.waiting) > 0 && s.active <= s.k {
		close(s.waiting[0])
		s.waiting = s.waiting[1:]
	} else {
		s.active--
	}
	s.mu.Unlock()
	time.Sleep(s.net / 2)
	return retries.SignalSuccess
}

// alwaysBusy answers backpressure to every request after latency.
type alwaysBusy struct {
	mu      sync.Mutex
	calls   []time.Duration
	start   time.Time
	latency time.Duration
}

func (s *alwaysBusy) call() retries.Signal {
	s.mu.Lock()
	s.calls = append(s.calls, time.Since(s.start))
	s.mu.Unlock()
	time.Sleep(s.latency)
	return retries.SignalBackpressure
}

// load is what a run of workers against a server saw, per second.
type load struct {
	ok, throttled []int                  // by second of the run
	maxWait       time.Duration          // the longest Acquire
	stats         []retries.LimiterStats // a snapshot at the end of each second
	grantsAt      map[time.Duration]int  // permits granted at each instant from the fifth second on
}

// grantsPerWakeup returns the permits granted from the fifth second on,
// over the distinct instants they were granted at: under synctest the calls
// granted together by one wakeup of the Limiter share an instant.
func (r *load) grantsPerWakeup() float64 {
	n := 0
	for _, k := range r.grantsAt {
		n += k
	}
	return float64(n) / math.Max(1, float64(len(r.grantsAt)))
}

// inFlight returns the median and the largest of the counts in flight at
// the ends of seconds from on.
func (r *load) inFlight(from int) (median, most int) {
	var n []int
	for _, s := range r.stats[from:] {
		n = append(n, s.InFlight)
	}
	slices.Sort(n)
	return n[len(n)/2], n[len(n)-1]
}

// share returns the successes per second and the share of backpressure
// over seconds [from, to).
func (r *load) share(from, to int) (perSecond, throttled float64) {
	ok, th := 0, 0
	for i := from; i < to; i++ {
		ok += r.ok[i]
		th += r.throttled[i]
	}
	return float64(ok) / float64(to-from), float64(th) / math.Max(1, float64(ok+th))
}

// drive runs workers goroutines that each acquire a permit from l, call
// srv and release the permit with its answer, for seconds seconds of fake
// time; at calls each change with the second it is due. It must run inside
// a synctest bubble.
func drive(t *testing.T, l *retries.Limiter, srv server, workers, seconds int, changes map[int]func()) *load {
	t.Helper()
	r := &load{ok: make([]int, seconds), throttled: make([]int, seconds), grantsAt: map[time.Duration]int{}}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				t0 := time.Now()
				p, err := l.Acquire(ctx)
				if err != nil {
					return
				}
				w := time.Since(t0)
				if at := time.Since(start); at >= 5*time.Second {
					mu.Lock()
					r.grantsAt[at]++
					mu.Unlock()
				}
				sig := srv.call()
				p.Release(sig)
				sec := int(time.Since(start) / time.Second)
				mu.Lock()
				r.maxWait = max(r.maxWait, w)
				if sec < seconds {
					switch sig {
					case retries.SignalSuccess:
						r.ok[sec]++
					case retries.SignalBackpressure:
						r.throttled[sec]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for sec := 1; sec <= seconds; sec++ {
			time.Sleep(time.Until(start.Add(time.Duration(sec) * time.Second)))
			r.stats = append(r.stats, l.Stats())
			if f := changes[sec]; f != nil {
				f()
			}
		}
	})
	wg.Wait()
	return r
}

func (r *load) log(t *testing.T) {
	t.Helper()
	for i := range r.ok {
		s := r.stats[i]
		t.Logf("%2ds: ok %5d throttled %4d | limit %6.1f rate %7.1f in flight %3d waiting %3d latency %v (min %v)",
			i+1, r.ok[i], r.throttled[i], s.Limit, s.Rate, s.InFlight, s.Waiting, s.Latency.Round(time.Microsecond), s.MinLatency.Round(time.Microsecond))
	}
}
