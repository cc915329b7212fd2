package retries

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrBudgetExhausted is matched (with [errors.Is]) by the [*RetryError] of
// a call whose [Budget] refused its next retry, and is the Refusal of the
// [State] that the exhaustion callback then sees.
var ErrBudgetExhausted = errors.New("retries: retry budget exhausted")

// Budget caps retries as a share of the traffic, so that an outage is not
// multiplied by the clients that retry against it (a retry storm). Within
// any window of 10 s, retries may number at most ratio × the first attempts
// made in that window, plus minPerSecond × 10 so that a trickle of traffic
// can still retry. These are the semantics of Finagle's RetryBudget
// (percentCanRetry, minRetriesPerSec, a ttl of 10 s).
//
// [WithBudget] attaches a Budget to a [Policy] and says how calls use it.
//
// A Budget is shared by every policy and goroutine given it and is safe for
// concurrent use. Share one per server (per endpoint and process), not
// across unrelated servers: one failing server would otherwise spend the
// budget of the healthy ones.
//
// The window is kept in 50 slices of 200 ms, so "any window of 10 s" holds
// to within one slice.
type Budget struct {
	ratio, minPerSecond float64

	epoch time.Time // NewBudget's time: slices are counted from it

	mu     sync.Mutex
	slices [budgetSlices]budgetSlice
	head   int64 // the index of the newest slice, counted from epoch
	total  budgetSlice
}

type budgetSlice struct{ deposits, retries, refusals int64 }

const (
	budgetWindow = 10 * time.Second
	budgetSlices = 50
	budgetTick   = budgetWindow / budgetSlices
)

// NewBudget returns a Budget that lets retries number at most ratio × first
// attempts plus minPerSecond × 10 within any 10 s. NewBudget(0.2, 10) is
// Finagle's default: retries add at most 20 % to the traffic, plus 10 a
// second. For a feed, NewBudget(0.1, 1) keeps an outage to about 1.1
// requests per document.
//
// NewBudget panics if ratio or minPerSecond is negative, infinite or NaN.
func NewBudget(ratio, minPerSecond float64) *Budget {
	for _, a := range []struct {
		name string
		v    float64
	}{{"ratio", ratio}, {"minPerSecond", minPerSecond}} {
		if !(a.v >= 0) || math.IsInf(a.v, 0) {
			panic(fmt.Sprintf("retries: NewBudget: %s %v is not a finite number ≥ 0", a.name, a.v))
		}
	}
	return &Budget{ratio: ratio, minPerSecond: minPerSecond, epoch: time.Now()}
}

// BudgetStats is a snapshot of a [Budget]: its parameters and what happened
// within the current window of 10 s.
type BudgetStats struct {
	// Ratio and MinPerSecond are the arguments of NewBudget.
	Ratio, MinPerSecond float64
	// Deposits is the number of first attempts in the window.
	Deposits int64
	// Retries is the number of retries granted in the window.
	Retries int64
	// Refusals is the number of retries refused in the window.
	Refusals int64
	// Available is the number of retries the budget would grant now.
	Available int64
}

// Stats returns a snapshot of b.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	return BudgetStats{
		Ratio: b.ratio, MinPerSecond: b.minPerSecond,
		Deposits: b.total.deposits, Retries: b.total.retries, Refusals: b.total.refusals,
		Available: b.available(),
	}
}

// String describes b's parameters and window, as in
// "Budget(ratio=0.2, min=10/s; in 10s: 120 first attempts, 14 retries, 0 refused)".
func (b *Budget) String() string {
	s := b.Stats()
	return fmt.Sprintf("Budget(ratio=%g, min=%g/s; in %v: %d first attempts, %d retries, %d refused)",
		s.Ratio, s.MinPerSecond, budgetWindow, s.Deposits, s.Retries, s.Refusals)
}

// available returns how many more retries the window allows. b.mu is held.
func (b *Budget) available() int64 {
	allowed := b.ratio*float64(b.total.deposits) + b.minPerSecond*budgetWindow.Seconds()
	n := math.Floor(allowed) - float64(b.total.retries)
	if n < 0 {
		return 0
	}
	if n > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(n)
}

// advance moves the window to the current time, forgetting the slices that
// left it. It reads the monotonic clock only (time.Since costs half of
// time.Now). b.mu is held.
func (b *Budget) advance() {
	idx := int64(time.Since(b.epoch) / budgetTick)
	if idx <= b.head {
		return // the clock did not move on, or went back: keep the current slice
	}
	if idx-b.head >= budgetSlices {
		b.slices = [budgetSlices]budgetSlice{}
		b.total = budgetSlice{}
		b.head = idx
		return
	}
	for b.head < idx {
		b.head++
		s := &b.slices[b.head%budgetSlices]
		b.total.deposits -= s.deposits
		b.total.retries -= s.retries
		b.total.refusals -= s.refusals
		*s = budgetSlice{}
	}
}

func (b *Budget) current() *budgetSlice { return &b.slices[b.head%budgetSlices] }

// deposit records a first attempt.
func (b *Budget) deposit() {
	b.mu.Lock()
	b.advance()
	b.current().deposits++
	b.total.deposits++
	b.mu.Unlock()
}

// allows reports whether a retry would be granted now, without spending
// it; a refusal is counted.
func (b *Budget) allows() bool { return b.take(false) }

// withdraw spends one retry and reports whether it was granted; a refusal
// is counted.
func (b *Budget) withdraw() bool { return b.take(true) }

func (b *Budget) take(spend bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	cur := b.current()
	if b.available() <= 0 {
		cur.refusals++
		b.total.refusals++
		return false
	}
	if spend {
		cur.retries++
		b.total.retries++
	}
	return true
}

// WithBudget attaches b to the policy: every first attempt deposits into
// it, and every retry must withdraw from it just before it is sent. A retry
// that b refuses ends the call as if the policy had given up: its exhaustion
// rule applies to the last outcome, and State.Refusal is
// [ErrBudgetExhausted], which a [*RetryError] then matches. A wait never
// withdraws, and a call whose context has ended spends nothing more. Do
// also asks b before it sleeps, so a retry that would be refused is not
// waited for.
//
// Copies of the policy share b. A nil b removes the budget. None of the
// seven policies has one.
func WithBudget(b *Budget) Option { return func(p *Policy) { p.shared.budget = b } }
