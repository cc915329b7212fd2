package retries

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBreakerOpen is matched (with [errors.Is]) by the error of a call that
// met an open [Breaker]: at once with [BreakerConfig.FailFast], or when its
// context ended while it waited for the breaker.
var ErrBreakerOpen = errors.New("retries: circuit breaker open")

// BreakerState is the state of a [Breaker].
type BreakerState uint8

const (
	// BreakerClosed lets every attempt through.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets one probe through at a time.
	BreakerHalfOpen
	// BreakerOpen lets no attempt through until the next probe is due.
	BreakerOpen
)

// String returns the state's name, as in "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// BreakerConfig configures a [Breaker]. Its zero value is a good default.
type BreakerConfig struct {
	// FailFast makes a call that meets the open breaker end at once with an
	// error matching [ErrBreakerOpen]. By default the call waits until the
	// breaker lets it through, or its context ends.
	FailFast bool
	// MaxProbeInterval caps the time between probes, which doubles from
	// 50 ms (or MaxProbeInterval if less) while probes fail; a recovery is
	// seen within about this long.
	// 0 means 1 s.
	MaxProbeInterval time.Duration
	// OnStateChange, if not nil, is called at each change of state, with
	// the state before and after, one call at a time and in the order the
	// changes happened. It runs outside the breaker's lock, on the
	// goroutine whose attempt made the change, so it may read the breaker's
	// State and Stats, but must not make calls through it.
	OnStateChange func(from, to BreakerState)
	// Backpressure matches the outcomes that ask the client to slow down,
	// which say nothing of whether the server is there: the breaker counts
	// them neither as failures nor as successes. The zero Predicate means
	// a 429, or a 503 with a Retry-After header.
	Backpressure Predicate
	// Window is how many of the most recent outcomes decide whether the
	// breaker opens; 0 means 20.
	Window int
	// Failures is how many failures among the Window most recent outcomes
	// open the breaker; 0 means 15, or three quarters of Window when
	// Window is set. A Failures above Window turns this rule off.
	Failures int
	// Streak is how many failures in a row, spanning at least a second
	// (or with no success ever), open the breaker; 0 means 5, and a
	// negative Streak turns this rule off.
	Streak int
}

// Breaker stops attempts to a server that has gone away, and lets them
// through again once it answers. [WithBreaker] attaches it to a policy.
//
// It opens when failures dominate the recent outcomes: 15 of the last 20
// attempts, or 5 failures in a row over at least a second (or with no
// success ever); BreakerConfig's Window, Failures and Streak change these
// numbers. A failure is a retried outcome that is not backpressure
// (BreakerConfig.Backpressure), or, retried or not, a 5xx, a connection
// error ([IsConnectionError]) or a timed-out attempt ([ErrAttemptTimeout]).
// A success is any other answer (a 404, a 412). Backpressure, any other
// error that is not retried, and an attempt whose context ended are
// neither. While it is open, it lets one attempt through as a probe, 50 ms
// after the opening and then at intervals that double while probes fail,
// up to MaxProbeInterval (1 s), or up to 100 ms after a probe answered with
// a 5xx (or another status retried): a server that answers is there,
// failing some requests, and the next probe may pass; after 8 such probes
// in a row it fails every request, and the interval doubles again. A
// probe that succeeds closes the breaker.
// An attempt let through before the breaker opened that succeeds after it
// does not close it: it says nothing of the server since.
//
// The zero Breaker is usable, as NewBreaker(BreakerConfig{}). A Breaker is
// safe for concurrent use by multiple goroutines; share one per server,
// and do not copy it.
type Breaker struct {
	cfg BreakerConfig

	// The lock-free paths read these: closed while the state is closed,
	// healthy while it is closed with no failure among the recent outcomes
	// (so that a success changes nothing but a count, in fastOK).
	closed, healthy atomic.Bool
	fastOK          atomic.Int64

	mu          sync.Mutex
	notify      sync.Mutex // held while OnStateChange runs, taken before mu is released
	state       BreakerState
	recent      []bool        // the last outcomes, true for a failure; made at the first
	next        int           // where the next outcome goes in recent
	seen        int           // outcomes in recent, up to len(recent)
	failures    int           // failures in recent
	streak      int           // failures since the last success
	streakSince time.Time     // when the first of them was reported; zero before any success
	interval    time.Duration // between probes, while open
	answered    int           // probes answered with a 5xx in a row since the opening
	probeAt     time.Time     // when the next probe may go
	probing     bool          // a probe is in flight
	wake        chan struct{} // closed when the waiters should look again
	timer       *time.Timer   // closes wake when the next probe is due

	opened              int64
	openSince           time.Time
	openFor             time.Duration
	successes, fails    int64
	probes, outageFails int64
}

const (
	breakerWindow    = 20
	breakerOpenAt    = 15
	breakerStreak    = 5
	breakerQuiet     = time.Second
	breakerFirstWait = 50 * time.Millisecond
	// breakerAnsweredWait caps the interval between probes answered with
	// a 5xx: against a server failing half its requests, a stretch of 2 s
	// with no probe through takes about 20 failures in a row. The cap
	// holds for breakerAnsweredProbes such probes in a row; past them the
	// server fails every request, as in a full outage of 503s, and the
	// interval doubles as it does for probes that meet no server (a
	// server failing half its requests fails 8 probes in a row once in
	// 256 openings). A full outage drew a probe every 100 ms without it.
	breakerAnsweredWait   = 100 * time.Millisecond
	breakerAnsweredProbes = 8
	breakerMaxWait        = time.Second
)

// NewBreaker returns a closed Breaker configured by c.
//
// NewBreaker panics if c.MaxProbeInterval, c.Window or c.Failures is
// negative.
func NewBreaker(c BreakerConfig) *Breaker {
	checkNonNegative("NewBreaker", "MaxProbeInterval", c.MaxProbeInterval)
	if c.Window < 0 || c.Failures < 0 {
		panic("retries: NewBreaker: negative Window or Failures")
	}
	if c.MaxProbeInterval == 0 {
		c.MaxProbeInterval = breakerMaxWait
	}
	b := &Breaker{cfg: c}
	b.closed.Store(true)
	b.healthy.Store(true)
	return b
}

// maxProbe is the cap on the interval between probes: MaxProbeInterval,
// or its default for the zero Breaker.
func (b *Breaker) maxProbe() time.Duration {
	if b.cfg.MaxProbeInterval > 0 {
		return b.cfg.MaxProbeInterval
	}
	return breakerMaxWait
}

// State returns the breaker's state.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// BreakerStats is a snapshot of a [Breaker].
type BreakerStats struct {
	State BreakerState
	// Opened is the number of times the breaker opened; OpenFor the time
	// it has spent open or half-open, the current spell included.
	Opened  int64
	OpenFor time.Duration
	// Successes and Failures count the outcomes it judged; Probes the
	// attempts it let through while open; OutageFailures the failures
	// while it was open or half-open, which spend no call's attempts.
	Successes, Failures, Probes, OutageFailures int64
}

// Stats returns a snapshot of b.
func (b *Breaker) Stats() BreakerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	openFor := b.openFor
	if b.state != BreakerClosed {
		openFor += time.Since(b.openSince)
	}
	return BreakerStats{
		State: b.state, Opened: b.opened, OpenFor: openFor,
		Successes: b.successes + b.fastOK.Load(), Failures: b.fails, Probes: b.probes, OutageFailures: b.outageFails,
	}
}

// String describes b's state, as in "Breaker(open, opened 2 times, open
// for 8.1s; 7400 ok, 151 failed, 12 probes)".
func (b *Breaker) String() string {
	s := b.Stats()
	return fmt.Sprintf("Breaker(%v, opened %d times, open for %v; %d ok, %d failed, %d probes)",
		s.State, s.Opened, s.OpenFor.Round(100*time.Millisecond), s.Successes, s.Failures, s.Probes)
}

// admit waits until the breaker lets an attempt through, and reports
// whether the attempt is a probe. It returns ErrBreakerOpen at once when
// the breaker is open and FailFast is set, and ctx's error when ctx ends
// while the call waits.
func (b *Breaker) admit(done <-chan struct{}) (probe bool, held time.Duration, err error) {
	if b.closed.Load() {
		return false, 0, nil
	}
	var since time.Time // when the attempt began to wait
	waited := func() time.Duration {
		if since.IsZero() {
			return 0
		}
		return max(time.Since(since), time.Nanosecond)
	}
	for {
		b.mu.Lock()
		if b.state == BreakerClosed {
			b.mu.Unlock()
			return false, waited(), nil
		}
		if !b.probing && !time.Now().Before(b.probeAt) {
			from := b.state
			b.probing, b.state = true, BreakerHalfOpen
			b.probes++
			b.unlock(from)
			return true, waited(), nil
		}
		if b.cfg.FailFast {
			b.mu.Unlock()
			return false, 0, ErrBreakerOpen
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		if since.IsZero() {
			since = time.Now()
		}
		select {
		case <-wake:
		case <-done:
			return false, waited(), errBreakerWait
		}
	}
}

// errBreakerWait marks a wait for the breaker that the context ended.
var errBreakerWait = errors.New("retries: waiting for the circuit breaker")

// breakerOutcome is what an attempt's outcome tells a Breaker.
type breakerOutcome uint8

const (
	breakerNeutral breakerOutcome = iota
	breakerSuccess
	breakerFailure
	breakerFailedAnswer // a failure that is an answer, a 5xx: the server is there
)

// report records the outcome of an attempt admitted by b, and reports
// whether it was a failure during an outage (the breaker open or
// half-open), which spends none of the call's attempts.
func (b *Breaker) report(probe bool, o breakerOutcome) (outage bool) {
	if !probe {
		switch {
		case o == breakerNeutral:
			return false
		case o == breakerSuccess && b.healthy.Load():
			b.fastOK.Add(1)
			return false
		}
	}
	b.mu.Lock()
	defer b.unlock(b.state)
	now := time.Now()
	if probe {
		b.probing = false
	}
	switch o {
	case breakerSuccess:
		b.successes++
		b.record(false)
		b.streak = 0
		// Only a probe's success closes the breaker: an attempt let
		// through before it opened, answered since, says nothing of the
		// server now.
		if probe && b.state != BreakerClosed {
			b.close(now)
		}
	case breakerFailure, breakerFailedAnswer:
		b.fails++
		b.record(true)
		if b.streak++; b.streak == 1 && b.successes+b.fastOK.Load() > 0 {
			b.streakSince = now // else it stays zero: no success, ever
		}
		switch {
		case b.state == BreakerClosed && b.failing(now):
			b.open(now, min(breakerFirstWait, b.maxProbe()))
		case probe && o == breakerFailedAnswer && b.answered < breakerAnsweredProbes:
			// A server that answers is there, failing some requests:
			// waiting longer for it says nothing more, and the next
			// probe may pass.
			b.answered++
			b.open(now, min(2*b.interval, breakerAnsweredWait, b.maxProbe()))
		case probe:
			b.open(now, min(2*b.interval, b.maxProbe()))
		}
		if b.state != BreakerClosed {
			b.outageFails++
			return true
		}
	default:
		if probe {
			b.wakeWaiters() // inconclusive: let another probe go
		}
	}
	return false
}

// unlock brings the lock-free paths' flags up to date, releases b.mu, and
// tells OnStateChange if the state is no longer from. The notify lock,
// taken before b.mu is released, keeps the calls in the order of the
// changes.
func (b *Breaker) unlock(from BreakerState) {
	to := b.state
	b.closed.Store(to == BreakerClosed)
	b.healthy.Store(to == BreakerClosed && b.failures == 0 && b.streak == 0)
	if from == to || b.cfg.OnStateChange == nil {
		b.mu.Unlock()
		return
	}
	b.notify.Lock()
	b.mu.Unlock()
	defer b.notify.Unlock()
	b.cfg.OnStateChange(from, to)
}

// record puts an outcome in the window of recent ones.
func (b *Breaker) record(failed bool) {
	if b.recent == nil {
		b.recent = make([]bool, cmp.Or(b.cfg.Window, breakerWindow))
	}
	if b.seen == len(b.recent) && b.recent[b.next] {
		b.failures--
	}
	b.recent[b.next] = failed
	if failed {
		b.failures++
	}
	b.next = (b.next + 1) % len(b.recent)
	b.seen = min(b.seen+1, len(b.recent))
}

// failing reports whether failures dominate the recent outcomes.
func (b *Breaker) failing(now time.Time) bool {
	openAt := b.cfg.Failures
	if openAt == 0 {
		openAt = breakerOpenAt
		if b.cfg.Window > 0 {
			openAt = max(1, b.cfg.Window*3/4)
		}
	}
	streak := cmp.Or(b.cfg.Streak, breakerStreak)
	return b.failures >= openAt ||
		streak > 0 && b.streak >= streak && now.Sub(b.streakSince) >= breakerQuiet
}

// open opens the breaker, or keeps it open, with the next probe due after
// interval. b.mu is held.
func (b *Breaker) open(now time.Time, interval time.Duration) {
	if b.state == BreakerClosed {
		b.opened++
		b.openSince = now
		b.answered = 0
	}
	b.state = BreakerOpen
	b.interval = interval
	b.probeAt = now.Add(interval)
	if b.timer == nil {
		b.timer = time.AfterFunc(interval, b.probeDue)
	} else {
		b.timer.Reset(interval)
	}
}

// probeDue wakes the waiters when a probe may go.
func (b *Breaker) probeDue() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != BreakerClosed {
		b.wakeWaiters()
	}
}

// close closes the breaker and lets every waiter through. b.mu is held.
func (b *Breaker) close(now time.Time) {
	b.state = BreakerClosed
	b.openFor += now.Sub(b.openSince)
	b.failures, b.seen, b.next = 0, 0, 0
	clear(b.recent)
	if b.timer != nil {
		b.timer.Stop()
	}
	b.wakeWaiters()
}

// wakeWaiters makes every waiting call look at the breaker again. b.mu is
// held.
func (b *Breaker) wakeWaiters() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// WithBreaker attaches b to the policy: every attempt passes b first, and
// its outcome tells b whether the server is there. An attempt that fails
// while b is open or half-open does not count against the policy's
// [Stop] or its [Budget], and the policy does not wait after it (b paces
// the next one); State.OutageAttempts counts them. Put b on the layer that
// reaches the server, beside a [Limiter] (an attempt that waited for the
// limiter while b opened waits for b again); with an outer layer that
// retries the failures, see [RetryIfOutage]. Copies share b; a nil b
// removes it. None of the seven policies has one.
func WithBreaker(b *Breaker) Option { return func(p *Policy) { p.shared.breaker = b } }

// RetryIfOutage returns a predicate that retries what p retries, but only
// while b is open or half-open. It is for the inner of two layers, when b
// is on the inner one beside a [Limiter] and the outer one retries the
// failures with p (DocV1 around Throttle): with
//
//	retries.RetryAny(retries.Throttle.Retry(), retries.RetryIfOutage(b, retries.DocV1.Retry()))
//
// the inner layer waits an outage out, and the outer one spends no attempt
// on it.
func RetryIfOutage(b *Breaker, p Predicate) Predicate {
	if b == nil {
		panic("retries: RetryIfOutage with a nil Breaker")
	}
	return Predicate{outagePred{b: b, p: p}}
}

type outagePred struct {
	b *Breaker
	p Predicate
}

func (o outagePred) match(v any, err error) bool { return !o.b.closed.Load() && o.p.match(v, err) }
func (o outagePred) onValue() bool               { return o.p.onValue() }
func (o outagePred) String() string              { return "RetryIfOutage(" + o.p.String() + ")" }

// judge is what an outcome tells b: backpressure (its Backpressure) and
// an ended context tell nothing; a retried outcome, a 5xx, a connection
// error and a timed-out attempt are failures; any other answer is a
// success; and any other error that is not retried tells nothing.
func (b *Breaker) judge(v any, err error, retried, ctxDone bool) breakerOutcome {
	if v == nil && err == nil && !retried && !ctxDone { // Do's success
		return breakerSuccess
	}
	switch {
	case ctxDone, b.backpressure(v, err):
		return breakerNeutral
	}
	code, answered := statusOf(v, err)
	switch {
	case answered && (retried || code >= 500 && code <= 599):
		return breakerFailedAnswer
	case retried:
		return breakerFailure
	case answered:
		return breakerSuccess
	}
	if err != nil && (inTree(err, ErrAttemptTimeout) || IsConnectionError(err)) {
		return breakerFailure // the server is not there, retried or not
	}
	if err != nil {
		return breakerNeutral
	}
	return breakerSuccess
}

// backpressure reports whether an outcome asks the client to slow down,
// by BreakerConfig.Backpressure or its default.
func (b *Breaker) backpressure(v any, err error) bool {
	return isBackpressure(b.cfg.Backpressure, v, err)
}
