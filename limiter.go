package retries

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Signal is what an attempt tells a [Limiter] about the server when its
// [Permit] is released.
type Signal uint8

const (
	// SignalIgnore says the attempt taught nothing about the server's
	// capacity (its context ended, or it failed before reaching it).
	SignalIgnore Signal = iota
	// SignalSuccess says the server answered.
	SignalSuccess
	// SignalBackpressure says the server asked the client to slow down: a
	// 429, a 503 with Retry-After, or what LimiterConfig.Backpressure
	// matches.
	SignalBackpressure
	// SignalFailure says the attempt failed in a way that is retried but
	// is not backpressure (a 503, a reset connection).
	SignalFailure
)

// String returns the signal's name, as in "SignalSuccess".
func (s Signal) String() string {
	switch s {
	case SignalIgnore:
		return "SignalIgnore"
	case SignalSuccess:
		return "SignalSuccess"
	case SignalBackpressure:
		return "SignalBackpressure"
	case SignalFailure:
		return "SignalFailure"
	}
	return fmt.Sprintf("Signal(%d)", uint8(s))
}

// LimiterConfig configures a [Limiter]. The zero value is usable: at most
// 256 attempts in flight, 4 at first, the default backpressure, and a
// floor of one attempt a second.
type LimiterConfig struct {
	// MaxInFlight caps the attempts in flight. Zero means 256; values
	// above 1<<20 mean 1<<20.
	MaxInFlight int
	// InitialInFlight is the in-flight limit the Limiter starts at, from
	// which slow start doubles it every round trip until the server
	// pushes back or its latency rises. Zero means 4; values above
	// MaxInFlight mean MaxInFlight. A caller that knows the server takes
	// many attempts at once saves the round trips from 4 to there.
	InitialInFlight int
	// Backpressure matches the outcomes that ask the client to slow down.
	// The zero Predicate means a 429, or a 503 with a Retry-After header.
	Backpressure Predicate
	// MinRate is the floor, in attempts per second, below which
	// backpressure never pushes the rate. Zero means 1.
	MinRate float64
}

// Limiter paces the attempts of many calls to one server, learning the
// server's capacity from what the attempts report: it limits both the
// attempts in flight and, once the server has pushed back, the attempts per
// second, so that it can hold a server that answers in a millisecond to
// fewer than one attempt in flight. Attach it to a [Policy] with
// [WithLimiter], or call [Limiter.Acquire] before each attempt and
// [Permit.Release] after it.
//
// It starts with 4 attempts in flight (LimiterConfig.InitialInFlight) and
// no rate limit, and settles where about 2 % of attempts meet
// backpressure; docs/limiter.md in the repository gives the control law.
//
// So backpressure that does not depend on the load misleads it: a proxy
// that answers 429 to a fixed share of requests whatever the rate (a
// quota shared with others, a faulty node) holds it down, the more the
// larger that share: above the 2 % it aims at, towards its floor, since
// slowing down never makes the 429s fewer. Leave such answers out with LimiterConfig.Backpressure,
// or pace with a fixed concurrency (retries feed -concurrency N) instead.
//
// Calls are served in order (FIFO), except that a retry after backpressure
// (through a Policy with WithLimiter) waits at the front; a waiter whose
// context ends leaves at once with the context's error. The zero Limiter
// is usable, as NewLimiter(LimiterConfig{}). A Limiter is safe for
// concurrent use by multiple goroutines; share one per server, and do not
// copy it.
type Limiter struct {
	// Read without the lock, on the fast path. The fast path earns its
	// packed ledger: an Acquire and Release cost 12 ns on it against 149 ns
	// through the lock (133 against 370 ns with 64 goroutines), measured by
	// BenchmarkLimiter with the fast path turned off in the same run.
	ledger  atomic.Uint64 // low ledgerBits: permits held; above: successes not yet drained
	fast    atomic.Int64  // the fast path grants while permits held < fast; 0 turns it off
	waiting atomic.Int32  // waiters queued: a releaser must dispatch
	handed  atomic.Int64  // permits handed to contexts and not yet taken or released (see HandPermit)
	epoch   time.Time

	cfg LimiterConfig

	mu      sync.Mutex
	head    *queued // FIFO of waiting calls
	tail    *queued
	free    *queued // queued calls to reuse
	waiters int     // calls in the queue
	timed   *queued // the head waiter, when its timer is set for its token
	ctl     control
	counts  struct{ successes, throttles, failures int64 }
}

const (
	ledgerBits     = 20
	ledgerMask     = 1<<ledgerBits - 1
	ledgerSuccess  = 1 << ledgerBits
	maxInFlightCap = ledgerMask
	sampleMask     = 63 // the fast path times one permit in 64
)

// NewLimiter returns a Limiter configured by c.
//
// NewLimiter panics if c.MaxInFlight or c.InitialInFlight is negative, or
// c.MinRate negative or not a finite number.
func NewLimiter(c LimiterConfig) *Limiter {
	if c.MaxInFlight < 0 {
		panic(fmt.Sprintf("retries: NewLimiter: MaxInFlight %d is negative", c.MaxInFlight))
	}
	if c.InitialInFlight < 0 {
		panic(fmt.Sprintf("retries: NewLimiter: InitialInFlight %d is negative", c.InitialInFlight))
	}
	if !(c.MinRate >= 0) || c.MinRate > 1e12 {
		panic(fmt.Sprintf("retries: NewLimiter: MinRate %v is not a finite number ≥ 0", c.MinRate))
	}
	l := &Limiter{cfg: c}
	l.mu.Lock()
	l.setDefaults()
	l.mu.Unlock()
	return l
}

// setDefaults fills in the defaults, once: NewLimiter calls it, and so does
// the first call that takes the lock of a zero Limiter. l.mu is held.
func (l *Limiter) setDefaults() {
	if l.ctl.maxLimit != 0 {
		return
	}
	c := &l.cfg
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	c.MaxInFlight = min(c.MaxInFlight, maxInFlightCap)
	if c.InitialInFlight == 0 {
		c.InitialInFlight = initialLimit
	}
	c.InitialInFlight = min(c.InitialInFlight, c.MaxInFlight)
	if c.MinRate == 0 {
		c.MinRate = 1
	}
	l.epoch = time.Now()
	l.ctl = newControl(*c)
	l.updateFast()
}

// Permit is the permission to make one attempt, from [Limiter.Acquire].
// Release it exactly once when the attempt ends. The zero Permit holds
// nothing, and releasing it does nothing.
type Permit struct {
	l     *Limiter
	start int64  // when it was granted, in nanoseconds since l.epoch, plus one; 0 if not timed
	n     uint32 // permits held when this one was granted, itself included
	flags uint8
}

const (
	permitFast      uint8 = 1 << iota // granted without the lock
	permitAtLimit                     // the in-flight limit was reached when granted
	permitRateBound                   // the rate limit bound when granted
	permitBatched                     // granted with others at once, for the rate limit (see batch)
	permitHanded                      // handed to a call by HandPermit
)

// sample is what p tells the control law about its attempt.
func (p Permit) sample() sample {
	return sample{n: p.n, sent: time.Duration(p.start - 1), atLimit: p.flags&permitAtLimit != 0, rateBound: p.flags&permitRateBound != 0,
		batched: p.flags&permitBatched != 0}
}

// queued is a call waiting in Acquire.
type queued struct {
	ch         chan struct{} // one send when granted
	timer      *time.Timer   // set, at the head of the queue, for the rate limit's next token
	prev, next *queued
	granted    bool
	paced      bool // it waited for the rate limit's next token
	permit     Permit
}

// newQueued returns a queued call from l's free list, or a new one. The
// list is per Limiter, not a sync.Pool, so that a channel never crosses
// from one synctest bubble to another. l.mu is held.
func (l *Limiter) newQueued() *queued {
	if w := l.free; w != nil {
		l.free, w.next = w.next, nil
		return w
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &queued{ch: make(chan struct{}, 1), timer: t}
}

// putQueued resets w and puts it on l's free list. l.mu is held.
func (l *Limiter) putQueued(w *queued) {
	w.prev, w.granted, w.paced, w.permit = nil, false, false, Permit{}
	w.next, l.free = l.free, w
}

// now returns the time since l was made.
func (l *Limiter) now() time.Duration { return time.Since(l.epoch) }

// Acquire blocks until an attempt may start or ctx ends, and returns the
// permission to make it. Calls are granted in the order they arrive. When
// ctx ends first, or has ended already, Acquire returns ctx's error and
// leaves nothing behind.
func (l *Limiter) Acquire(ctx context.Context) (Permit, error) {
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return Permit{}, ctx.Err()
		default:
		}
	}
	var p Permit
	if l.tryFast(&p) {
		return p, nil
	}
	return l.acquireSlow(ctx, false)
}

// tryFast is Acquire's fast path: far below the in-flight limit, with no
// rate limit and no one waiting, a permit is one compare-and-swap and
// reads no clock. It sets the permit in p, which is empty, or reports
// false when the slow path must decide.
func (l *Limiter) tryFast(p *Permit) bool {
	for {
		w := l.ledger.Load()
		n := w & ledgerMask
		if int64(n) >= l.fast.Load() {
			return false
		}
		if l.ledger.CompareAndSwap(w, w+1) {
			p.l, p.n, p.flags = l, uint32(n+1), permitFast
			if (w>>ledgerBits)&sampleMask == 0 {
				p.start = int64(l.now()) + 1 // a sample for the latency baseline
			}
			return true
		}
	}
}

// acquireSlow waits in the queue, at its back; or, for front, at its front
// for the next dispatch (a release, or another call's arrival) rather than
// at once, unless nothing is in flight, since no release would come. front
// is for an attempt whose previous attempt met backpressure: it takes the
// place that an attempt's end frees at the server, instead of bouncing
// again at once or waiting behind every call in the queue. A 429 becomes a
// fill.
func (l *Limiter) acquireSlow(ctx context.Context, front bool) (Permit, error) {
	if front && ctx.Err() != nil {
		return Permit{}, ctx.Err() // as Acquire: a done context takes nothing
	}
	l.mu.Lock()
	l.setDefaults()
	now := l.now()
	if !front && l.head == nil && l.grantable(now, 1) {
		p := l.grant(now, false)
		l.updateFast()
		l.mu.Unlock()
		return p, nil
	}
	w := l.newQueued()
	l.enqueue(w, front)
	if !front || l.inFlight() == 0 {
		l.dispatch(now) // and set w's timer if w is the head and waits for a token
	}
	l.mu.Unlock()

	for {
		select {
		case <-w.ch:
			l.mu.Lock()
			p := w.permit
			l.putQueued(w)
			l.mu.Unlock()
			return p, nil
		case <-w.timer.C:
			// At the head of the queue, with its token due: the waiter
			// paces itself, so the Limiter needs no goroutine of its own.
			l.mu.Lock()
			if l.timed == w {
				l.timed = nil
			}
			l.dispatch(l.now())
			l.mu.Unlock()
			continue
		case <-ctx.Done():
		}
		break
	}
	l.mu.Lock()
	if w.granted {
		// Granted as ctx ended: hand the permit on.
		<-w.ch
		l.returnUnused(w.permit)
	} else {
		l.remove(w)
		l.dispatch(l.now())
	}
	l.putQueued(w)
	l.mu.Unlock()
	return Permit{}, ctx.Err()
}

// enqueue puts w at the back of the queue, or at its front. l.mu is held.
func (l *Limiter) enqueue(w *queued, front bool) {
	if front {
		w.next = l.head
		if l.head != nil {
			l.head.prev = w
		} else {
			l.tail = w
		}
		l.head = w
	} else {
		w.prev = l.tail
		if l.tail != nil {
			l.tail.next = w
		} else {
			l.head = w
		}
		l.tail = w
	}
	l.waiters++
	l.waiting.Store(int32(l.waiters))
	l.fast.Store(0)
}

// remove takes w, not granted, out of the queue. l.mu is held.
func (l *Limiter) remove(w *queued) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	if l.timed == w {
		w.timer.Stop()
		l.timed = nil
	}
	l.waiters--
	l.waiting.Store(int32(l.waiters))
}

// inFlight returns the permits held.
func (l *Limiter) inFlight() int { return int(l.ledger.Load() & ledgerMask) }

// grantable reports whether a permit may be granted now, given that the
// rate limit's bucket must hold need tokens. l.mu is held.
func (l *Limiter) grantable(now time.Duration, need float64) bool {
	if l.inFlight() >= l.ctl.slots() {
		return false
	}
	return l.ctl.bucket.available(now) >= need
}

// batch returns the tokens that the head of the queue waits for while the
// rate limit binds: as many as there are calls waiting, room in flight
// and tokens in rateBatch at the rate limit or the rate the server admits,
// whichever is lower (a rate limit starts high and comes down to the
// server's within round trips), and at least one. The calls then go out
// together, rather than each on a wakeup of its own: on a sleeping machine
// every wakeup costs tens of microseconds, and paced at 1000/s one each
// millisecond cost a feed more than its requests did. A batch is smaller
// than the burst the bucket allows after any pause. Calls go one by one
// while the smoothed round trip is longer than rateBurst: then batches
// would overlap in flight, and a server with a few slots and no queue
// would turn the bursts away where a paced stream fits. l.mu is held.
func (l *Limiter) batch(now time.Duration) float64 {
	b := &l.ctl.bucket
	if b.rate == 0 || l.ctl.latency.srtt == 0 || l.ctl.latency.srtt > float64(rateBurst) {
		return 1
	}
	r := min(b.rate, l.ctl.admitted.rate(now))
	return max(1, min(float64(l.waiters), float64(l.ctl.slots()-l.inFlight()), math.Floor(r.in(rateBatch))))
}

// grant takes a permit for a call that waited for the rate limit's token,
// or not. l.mu is held.
func (l *Limiter) grant(now time.Duration, paced bool) Permit {
	n := uint32(l.ledger.Add(1) & ledgerMask)
	p := Permit{l: l, start: int64(now) + 1, n: n}
	if int(n) >= l.ctl.slots() {
		p.flags |= permitAtLimit
	}
	if l.ctl.bucket.take() || paced {
		p.flags |= permitRateBound
	}
	return p
}

// dispatch grants permits to the waiters at the head of the queue while it
// may, and sets the head waiter's timer when it waits for the rate limit's
// next token. l.mu is held.
func (l *Limiter) dispatch(now time.Duration) {
	need := l.batch(now)
	batched := need > 1
	for l.head != nil && l.grantable(now, need) {
		w := l.head
		l.remove(w)
		w.permit, w.granted = l.grant(now, w.paced), true
		if batched {
			w.permit.flags |= permitBatched
		}
		w.ch <- struct{}{}
		need = 1 // the rest of the batch
	}
	var due time.Duration
	if l.head != nil && l.inFlight() < l.ctl.slots() {
		due = l.ctl.bucket.untilTokens(now, l.batch(now))
	}
	switch {
	case due > 0 && l.timed != l.head:
		if l.timed != nil {
			l.timed.timer.Stop()
		}
		l.timed, l.head.paced = l.head, true
		l.head.timer.Reset(due)
	case due == 0 && l.timed != nil:
		l.timed.timer.Stop()
		l.timed = nil
	}
	l.updateFast()
}

// updateFast opens the fast path while no one waits, no rate limit is on,
// no permit is handed to a call (see HandPermit), and the in-flight limit
// is far away. l.mu is held (or l is new).
func (l *Limiter) updateFast() {
	f := int64(0)
	if l.waiters == 0 && l.ctl.bucket.rate == 0 && l.ctl.bucket.until == 0 && l.handed.Load() == 0 {
		f = int64(l.ctl.slots() / 2)
	}
	l.fast.Store(f)
}

// returnUnused hands back a permit that was granted but not used: it
// refunds the rate limit's token and teaches nothing. l.mu is held.
func (l *Limiter) returnUnused(p Permit) {
	l.ledger.Add(^uint64(0))
	l.ctl.bucket.refund()
	l.dispatch(l.now())
}

// Release ends the attempt and reports s about it to the Limiter. Release
// a Permit exactly once; releasing the zero Permit does nothing. A release
// with SignalBackpressure hands its place to no waiting call (the server
// had none to give) unless nothing else is in flight: the next release
// does.
func (p Permit) Release(s Signal) { p.release(s, 0) }

// wake hands released permits to the calls waiting for them.
func (l *Limiter) wake() {
	l.mu.Lock()
	l.dispatch(l.now())
	l.mu.Unlock()
}

// maxHold caps the time a Retry-After holds a Limiter back.
const maxHold = 10 * time.Second

// release is Release; a backpressure signal with hold > 0 (the outcome's
// Retry-After) also holds every attempt back for hold, at most maxHold.
func (p Permit) release(s Signal, hold time.Duration) {
	l := p.l
	if l == nil {
		return
	}
	if p.start == 0 && (s == SignalSuccess || s == SignalIgnore) {
		// Fast path: a permit granted far from the limits, not timed.
		if s == SignalSuccess {
			l.ledger.Add(ledgerSuccess - 1)
		} else {
			l.ledger.Add(^uint64(0))
		}
		if l.waiting.Load() != 0 {
			l.wake()
		}
		return
	}
	l.mu.Lock()
	now := l.now()
	delta := ^uint64(0)
	switch s {
	case SignalSuccess:
		delta += ledgerSuccess
	case SignalBackpressure:
		l.counts.throttles++
	case SignalFailure:
		l.counts.failures++
	}
	w := l.ledger.Add(delta)
	if s == SignalSuccess || s == SignalFailure {
		l.ctl.admitted.record(now, l.drain(w))
	}
	smp := p.sample()
	if p.flags&(permitHanded|permitFast|permitRateBound) == permitHanded && 2*int(p.n) >= l.ctl.slots() {
		// Handed to a call by a dispatcher (see HandPermit), which asks
		// for permits only with an operation ready to go, and catches
		// up in bursts after each wait: a permit granted near the limit
		// by the slow path binds, though the burst was granted below it.
		smp.atLimit = true
	}
	l.ctl.learn(smp, s, now)
	if s == SignalBackpressure && hold > 0 {
		l.ctl.hold(now + min(hold, maxHold))
	}
	if s != SignalBackpressure || l.inFlight() == 0 {
		// Backpressure frees no place at the server: the next release
		// hands it on (to the attempt that met it, at the front), unless
		// nothing else is in flight.
		l.dispatch(now)
	}
	l.mu.Unlock()
}

// drain returns the successes and failures so far, given l.ledger's value
// w. When the successes counted in the ledger near its capacity it moves
// them into l.counts, so that the ledger never overflows; it leaves small
// counts in place, since the fast path samples by them. l.mu is held.
func (l *Limiter) drain(w uint64) int64 {
	if k := w >> ledgerBits; k >= 1<<40 {
		l.ledger.Add(-(k << ledgerBits))
		l.counts.successes += int64(k)
		w -= k << ledgerBits
	}
	return l.counts.successes + int64(w>>ledgerBits) + l.counts.failures
}

// LimiterStats is a snapshot of a [Limiter].
type LimiterStats struct {
	// Limit is the current limit on attempts in flight.
	Limit float64
	// Rate is the current limit on attempts per second; 0 means none.
	Rate float64
	// InFlight is the number of permits held; Waiting the number of calls
	// waiting for one.
	InFlight, Waiting int
	// Successes, Throttles and Failures count the released permits by
	// Signal.
	Successes, Throttles, Failures int64
	// Latency is the smoothed latency of successful attempts, and
	// MinLatency its recent minimum, the baseline that rising latency is
	// measured against; both are 0 before the first sample.
	Latency, MinLatency time.Duration
}

// Stats returns a snapshot of l.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setDefaults()
	w := l.ledger.Load()
	l.drain(w)
	return LimiterStats{
		Limit: l.ctl.limit, Rate: float64(l.ctl.bucket.rate),
		InFlight: l.inFlight(), Waiting: l.waiters,
		Successes: l.counts.successes + int64(l.ledger.Load()>>ledgerBits), Throttles: l.counts.throttles, Failures: l.counts.failures,
		Latency: l.ctl.latency.smoothed(), MinLatency: l.ctl.latency.baseline(),
	}
}

// String describes l's state, as in "Limiter(limit=12.4, rate=498.2/s,
// in flight=3, waiting=61, latency=1.2ms (min 1ms); 7400 ok, 151
// throttled, 12 failed)".
func (l *Limiter) String() string {
	s := l.Stats()
	rate := "none"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%.1f/s", s.Rate)
	}
	return fmt.Sprintf("Limiter(limit=%.1f, rate=%s, in flight=%d, waiting=%d, latency=%v (min %v); %d ok, %d throttled, %d failed)",
		s.Limit, rate, s.InFlight, s.Waiting, s.Latency.Round(10*time.Microsecond), s.MinLatency.Round(10*time.Microsecond),
		s.Successes, s.Throttles, s.Failures)
}

// backpressure reports whether an outcome asks the client to slow down.
func (l *Limiter) backpressure(v any, err error) bool {
	return isBackpressure(l.cfg.Backpressure, v, err)
}

// isBackpressure reports whether an outcome asks the client to slow down
// by p, or, for the zero Predicate, by defaultBackpressure: the rule of
// LimiterConfig.Backpressure and BreakerConfig.Backpressure.
func isBackpressure(p Predicate, v any, err error) bool {
	if p.p != nil {
		return p.match(v, err)
	}
	return defaultBackpressure(v, err)
}

// defaultBackpressure matches a 429, or a 503 with a Retry-After header.
func defaultBackpressure(v any, err error) bool {
	code, ok := statusOf(v, err)
	if !ok {
		return false
	}
	switch code {
	case 429:
		return true
	case 503:
		h := outcomeHeader(State{Value: v, Err: err})
		return h != nil && h.Get("Retry-After") != ""
	}
	return false
}

// WithLimiter attaches l to the policy: every attempt acquires a permit
// from l first and releases it with what its outcome says about the server.
// A retry after backpressure skips the policy's wait, since l paces it:
// it waits at the front of l's queue and goes out when the next attempt
// ends, since the one answered with backpressure freed no place at the
// server. When that outcome carries a Retry-After header, l holds every
// attempt back for that long (at most 10 s), then lets one through until
// its outcome comes back. Copies share l; a nil l removes it.
func WithLimiter(l *Limiter) Option { return func(p *Policy) { p.shared.limiter = l } }
