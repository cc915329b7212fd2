package retries

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
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
// The zero Budget is valid, but refuses every retry, as NewBudget(0, 0)
// does. A Budget is shared by every policy and goroutine given it and is
// safe for concurrent use. Share one per server (per endpoint and process), not
// across unrelated servers: one failing server would otherwise spend the
// budget of the healthy ones.
//
// The window is kept in 50 slices of 200 ms, so "any window of 10 s" holds
// to within one slice. While the budget is in use, a timer marks the start
// of each slice; it stops itself after a slice in which nothing happened.
type Budget struct {
	ratio, minPerSecond float64

	epoch     time.Time // NewBudget's time, or the zero Budget's first use: slices are counted from it
	epochOnce sync.Once

	// The counts since NewBudget. A first attempt adds to one shard of
	// deposits, picked by its goroutine's stack, so that goroutines on
	// different processors rarely write one cache line.
	deposits [budgetShards]budgetShard
	retries  atomic.Int64
	refusals atomic.Int64

	ticking atomic.Bool   // the timer marks slice starts
	seq     atomic.Uint64 // odd while a mark is written (a sequence lock)
	head    atomic.Int64  // the newest slice whose start is marked

	mu    sync.Mutex               // serialises the writers of marks
	marks [budgetSlices]budgetMark // the counts at the start of slice k, at k % budgetSlices
	last  budgetCounts             // the counts the timer marked last
}

// budgetShard is a count of deposits on a cache line of its own.
type budgetShard struct {
	n atomic.Int64
	_ [56]byte
}

// budgetCounts is a snapshot of a Budget's counts.
type budgetCounts struct{ deposits, retries, refusals int64 }

// budgetMark is the counts at the start of a slice, written under the
// sequence lock.
type budgetMark struct{ deposits, retries, refusals atomic.Int64 }

const (
	budgetWindow = 10 * time.Second
	budgetSlices = 50
	budgetTick   = budgetWindow / budgetSlices
	budgetShards = 8
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
	if !b.ticking.Load() {
		b.markLocked(b.index(), b.last)
	}
	b.mu.Unlock()
	w := b.window()
	return BudgetStats{
		Ratio: b.ratio, MinPerSecond: b.minPerSecond,
		Deposits: w.deposits, Retries: w.retries, Refusals: w.refusals,
		Available: b.available(w),
	}
}

// String describes b's parameters and window, as in
// "Budget(ratio=0.2, min=10/s; in 10s: 120 first attempts, 14 retries, 0 refused)".
func (b *Budget) String() string {
	s := b.Stats()
	return fmt.Sprintf("Budget(ratio=%g, min=%g/s; in %v: %d first attempts, %d retries, %d refused)",
		s.Ratio, s.MinPerSecond, budgetWindow, s.Deposits, s.Retries, s.Refusals)
}

// available returns how many more retries the window w allows.
func (b *Budget) available(w budgetCounts) int64 {
	allowed := b.ratio*float64(w.deposits) + b.minPerSecond*budgetWindow.Seconds()
	n := math.Floor(allowed) - float64(w.retries)
	if n < 0 {
		return 0
	}
	if n > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(n)
}

// counts returns b's counts now.
func (b *Budget) counts() budgetCounts {
	c := budgetCounts{retries: b.retries.Load(), refusals: b.refusals.Load()}
	for i := range b.deposits {
		c.deposits += b.deposits[i].n.Load()
	}
	return c
}

// window returns the counts within the window: now, less those at the
// start of its oldest slice.
func (b *Budget) window() budgetCounts {
	start := b.windowStart()
	now := b.counts()
	return budgetCounts{now.deposits - start.deposits, now.retries - start.retries, now.refusals - start.refusals}
}

// windowStart returns the counts at the start of the window's oldest
// slice, head-49, whose slot head+1 will overwrite.
func (b *Budget) windowStart() budgetCounts {
	for {
		seq := b.seq.Load()
		if seq&1 != 0 {
			runtime.Gosched() // a mark is being written: a few stores
			continue
		}
		m := &b.marks[(b.head.Load()+1)%budgetSlices]
		start := budgetCounts{m.deposits.Load(), m.retries.Load(), m.refusals.Load()}
		if b.seq.Load() == seq {
			return start
		}
	}
}

// index returns the slice the clock is in. It reads the monotonic clock
// only (time.Since costs half of time.Now).
func (b *Budget) index() int64 { return int64(b.since() / budgetTick) }

// since returns the time since the budget's epoch: NewBudget's time, or,
// for the zero Budget, its first use (from year 1, the slice arithmetic
// would overflow and its timer fire at once, again and again).
func (b *Budget) since() time.Duration {
	b.epochOnce.Do(func() {
		if b.epoch.IsZero() {
			b.epoch = time.Now()
		}
	})
	return time.Since(b.epoch)
}

// markLocked marks c as the counts at the start of every slice after head
// up to idx, and moves head to idx. b.mu is held.
func (b *Budget) markLocked(idx int64, c budgetCounts) {
	head := b.head.Load()
	if idx <= head {
		return // the clock did not move on, or went back
	}
	b.seq.Add(1)
	for k := max(head+1, idx-budgetSlices+1); k <= idx; k++ {
		m := &b.marks[k%budgetSlices]
		m.deposits.Store(c.deposits)
		m.retries.Store(c.retries)
		m.refusals.Store(c.refusals)
	}
	b.head.Store(idx)
	b.seq.Add(1)
}

// wake starts the timer that marks slice starts, if it is not running.
// Nothing changed since it stopped but what is in the current slice, so
// the slices it did not mark start with the counts it marked last.
func (b *Budget) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ticking.Load() {
		return
	}
	idx := b.index()
	b.markLocked(idx, b.last)
	b.ticking.Store(true)
	b.armLocked(idx)
}

// armLocked sets the timer for the start of the slice after idx. b.mu is
// held.
func (b *Budget) armLocked(idx int64) {
	time.AfterFunc(time.Duration(idx+1)*budgetTick-b.since(), b.tick)
}

// tick marks the start of the slice the clock is in with the counts now,
// and stops the timer if nothing happened in the slice before.
func (b *Budget) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx, c := b.index(), b.counts()
	b.markLocked(idx, c)
	if c == b.last {
		// Stop; an attempt that counted itself before this store sees
		// the timer running, so check again after it.
		b.ticking.Store(false)
		if b.counts() == c {
			return
		}
		b.ticking.Store(true)
	}
	b.last = c
	b.armLocked(idx)
}

// deposit records a first attempt: one atomic add on the goroutine's
// shard, with no lock and no clock.
func (b *Budget) deposit() {
	var here byte
	b.deposits[shardOf(&here)].n.Add(1)
	if !b.ticking.Load() {
		b.wake()
	}
}

// shardOf picks a shard from the address of a variable on the calling
// goroutine's stack: goroutines have stacks of their own, so those that run
// at once rarely share a shard. The address is only hashed, never used.
func shardOf(p *byte) int {
	a := uintptr(unsafe.Pointer(p)) >> 13 // stacks are at least 8 KiB apart
	return int((a ^ a>>4 ^ a>>8) % budgetShards)
}

// Spend reports whether one extra request may go now, a retry or a hedge
// sent outside a [Policy], and counts it as a retry when it may; a
// refusal is counted too. Code that hedges spends the same budget as its
// policy's retries, so that the two together stay within its ratio: the
// policy counts its first attempts, or [Budget.Deposit] does.
func (b *Budget) Spend() bool { return b.withdraw() }

// Deposit counts a first attempt made outside a [Policy] with this
// budget, which lets ratio more retries through.
func (b *Budget) Deposit() { b.deposit() }

// allows reports whether a retry would be granted now, without spending
// it; a refusal is counted.
func (b *Budget) allows() bool { return b.take(false) }

// withdraw spends one retry and reports whether it was granted; a refusal
// is counted.
func (b *Budget) withdraw() bool { return b.take(true) }

// take grants a retry while the window has room, and spends it with
// spend. Concurrent grants never exceed the room: the spend is a
// compare-and-swap on the count of retries the decision read.
func (b *Budget) take(spend bool) bool {
	if !b.ticking.Load() {
		b.wake()
	}
	for {
		start, now := b.windowStart(), b.counts()
		w := budgetCounts{deposits: now.deposits - start.deposits, retries: now.retries - start.retries}
		if b.available(w) <= 0 {
			b.refusals.Add(1)
			return false
		}
		if !spend || b.retries.CompareAndSwap(now.retries, now.retries+1) {
			return true
		}
	}
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
