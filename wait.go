package retries

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Wait decides how long a [Policy] pauses before the next attempt. It is
// computed after every retried attempt, before the [Stop] is checked, from the
// [State] of the attempt that just ended: State.Attempt is 1 for the pause
// after the first attempt.
//
// Waits are immutable values built by the Wait… functions and are safe to
// share. Every wait is computed in floating point and saturates: it is never
// negative and never more than the largest [time.Duration], whatever the
// attempt number, so a policy that never stops cannot overflow. Random waits
// draw from math/rand/v2's goroutine-safe generator.
//
// The zero Wait does not wait.
type Wait struct {
	w waiter
}

// waiter is what every wait implements. A wait that wraps others forwards
// each method to them.
type waiter interface {
	// next returns the wait after the attempt in s, never negative, and
	// whether the wait asks the policy to give up instead (only the backoff
	// adapter does, when its BackOff returns backoff.Stop).
	next(s State) (d time.Duration, stop bool)
	// bounds returns the least and the greatest wait next can return for s.
	bounds(s State) (lo, hi time.Duration)
	// start returns a waiter private to one call to Do when the wait keeps
	// state for a call (the backoff adapter), and nil when the wait itself
	// can serve every call.
	start() waiter
	// usesClock reports whether next reads State.Elapsed, so that Do must
	// keep it current.
	usesClock() bool
	String() string
}

// maxWait is the largest time.Duration, where every wait saturates.
const maxWait = time.Duration(math.MaxInt64)

// Duration returns the wait that follows the attempt described by s. Random
// waits draw a new value on each call; a wait built by [WaitBackOff] starts a
// fresh BackOff on each call, so Duration reports its first value.
func (w Wait) Duration(s State) time.Duration {
	if w.w == nil {
		return 0
	}
	d, _ := w.begin().next(s)
	return d
}

// Bounds returns the least and the greatest wait that can follow the attempt
// described by s: equal for deterministic waits, the ends of the range for
// random ones. For [WaitFunc] both are f's result, and for [WaitBackOff]
// both are a fresh BackOff's first value.
func (w Wait) Bounds(s State) (lo, hi time.Duration) {
	if w.w == nil {
		return 0, 0
	}
	return w.w.bounds(s)
}

// begin returns the waiter to use for one call to Do.
func (w Wait) begin() waiter {
	if w.w == nil {
		return nil
	}
	if pw := w.w.start(); pw != nil {
		return pw
	}
	return w.w
}

// String describes the wait and its parameters, as in
// "WaitExponential(multiplier=1s, base=2, min=0s, max=3s)".
func (w Wait) String() string {
	if w.w == nil {
		return "WaitNone()"
	}
	return w.w.String()
}

func (w Wait) usesClock() bool { return w.w != nil && w.w.usesClock() }

func (w Wait) next(s State) (time.Duration, bool) {
	if w.w == nil {
		return 0, false
	}
	return w.w.next(s)
}

// WaitNone does not wait between attempts. It equals the zero Wait.
func WaitNone() Wait { return Wait{} }

// WaitFixed waits d between attempts.
//
// WaitFixed panics if d is negative.
func WaitFixed(d time.Duration) Wait {
	checkNonNegative("WaitFixed", "d", d)
	return Wait{fixed{d: d}}
}

type fixed struct {
	stateless
	d time.Duration
}

func (f fixed) next(State) (time.Duration, bool)    { return f.d, false }
func (f fixed) bounds(State) (lo, hi time.Duration) { return f.d, f.d }
func (f fixed) String() string                      { return fmt.Sprintf("WaitFixed(%v)", f.d) }

// WaitRandom waits a uniformly random duration in [lo, hi] (tenacity's
// wait_random(min, max)).
//
// WaitRandom panics if lo or hi is negative or if lo > hi.
func WaitRandom(lo, hi time.Duration) Wait {
	checkNonNegative("WaitRandom", "lo", lo)
	checkNonNegative("WaitRandom", "hi", hi)
	if lo > hi {
		panic(fmt.Sprintf("retries: WaitRandom(%v, %v): lo > hi", lo, hi))
	}
	return Wait{random{lo: lo, hi: hi}}
}

type random struct {
	stateless
	lo, hi time.Duration
}

func (r random) next(State) (time.Duration, bool)    { return r.at(rand.Float64()), false }
func (r random) bounds(State) (lo, hi time.Duration) { return r.lo, r.hi }

// at returns the wait for the uniform draw u in [0, 1].
func (r random) at(u float64) time.Duration {
	return clampNanos(float64(r.lo)+u*(float64(r.hi)-float64(r.lo)), r.lo, r.hi)
}
func (r random) String() string { return fmt.Sprintf("WaitRandom(%v, %v)", r.lo, r.hi) }

// WaitIncrementing waits start after the first attempt and increment more
// after each later one: start + increment×(n−1) for attempt n, never less
// than 0 and, when limit is not 0, never more than limit (tenacity's max).
// The increment may be negative, for waits that shrink to 0.
//
// WaitIncrementing panics if start or limit is negative.
func WaitIncrementing(start, increment, limit time.Duration) Wait {
	checkNonNegative("WaitIncrementing", "start", start)
	checkNonNegative("WaitIncrementing", "limit", limit)
	return Wait{incrementing{first: start, inc: increment, max: limit}}
}

type incrementing struct {
	stateless
	first, inc, max time.Duration
}

func (w incrementing) next(s State) (time.Duration, bool) { return w.at(s), false }

func (w incrementing) at(s State) time.Duration {
	d := fromNanos(float64(w.first) + float64(w.inc)*float64(s.Attempt-1))
	if w.max > 0 && d > w.max {
		d = w.max
	}
	return d
}

func (w incrementing) bounds(s State) (lo, hi time.Duration) { d := w.at(s); return d, d }

func (w incrementing) String() string {
	return fmt.Sprintf("WaitIncrementing(start=%v, increment=%v, max=%s)", w.first, w.inc, capString(w.max))
}

// Exponential holds the parameters of the exponential waits: the wait after
// attempt n is Multiplier × Base^(n−1), clamped to [Min, Max]. When Min is
// more than Max, Min wins, as in tenacity.
type Exponential struct {
	// Multiplier is the wait after the first attempt. Zero means 1 s,
	// tenacity's default.
	Multiplier time.Duration
	// Base is the growth factor between attempts. Zero means 2.
	Base float64
	// Min is the smallest wait. Zero means no lower bound.
	Min time.Duration
	// Max is the largest wait. Zero means no upper bound (the largest
	// time.Duration).
	Max time.Duration
}

// norm fills in the defaults and checks the parameters.
func (e Exponential) norm(fn string) Exponential {
	checkNonNegative(fn, "Multiplier", e.Multiplier)
	checkNonNegative(fn, "Min", e.Min)
	checkNonNegative(fn, "Max", e.Max)
	if e.Base < 0 || math.IsNaN(e.Base) || math.IsInf(e.Base, 0) {
		panic(fmt.Sprintf("retries: %s: Base %v is not a positive finite number", fn, e.Base))
	}
	return e.withDefaults()
}

// withDefaults fills in the zero fields that have a default.
func (e Exponential) withDefaults() Exponential {
	if e.Multiplier == 0 {
		e.Multiplier = time.Second
	}
	if e.Base == 0 {
		e.Base = 2
	}
	if e.Max == 0 {
		e.Max = maxWait
	}
	return e
}

// high returns Multiplier × Base^(n−1) clamped to [Min, Max], in float
// nanoseconds, without ever forming Inf × 0 or an out-of-range conversion.
func (e Exponential) high(n int) float64 {
	lo, hi := float64(e.Min), float64(e.Max)
	// The multiplier is at least 1ns and the power is in [0, +Inf], so v is
	// never NaN: +Inf is clamped to hi like any large value.
	v := float64(e.Multiplier) * math.Pow(e.Base, float64(n-1))
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}

// String describes the parameters, defaults filled in, as in
// "multiplier=1s, base=2, min=0s, max=none".
func (e Exponential) String() string {
	e = e.withDefaults()
	return fmt.Sprintf("multiplier=%v, base=%g, min=%v, max=%s", e.Multiplier, e.Base, e.Min, capString(e.Max))
}

// WaitExponential waits Multiplier × Base^(n−1) after attempt n, clamped to
// [Min, Max] (tenacity's wait_exponential). With the zero Exponential it
// waits 1 s, 2 s, 4 s, … up to the largest time.Duration.
//
// WaitExponential panics if a duration in e is negative or e.Base is negative
// or not finite.
func WaitExponential(e Exponential) Wait {
	return Wait{expo{e: e.norm("WaitExponential")}}
}

type expo struct {
	stateless
	e Exponential
}

func (w expo) next(s State) (time.Duration, bool)    { return w.at(s), false }
func (w expo) at(s State) time.Duration              { return w.e.clamp(w.e.high(s.Attempt)) }
func (w expo) bounds(s State) (lo, hi time.Duration) { d := w.at(s); return d, d }
func (w expo) String() string                        { return "WaitExponential(" + w.e.String() + ")" }

// WaitRandomExponential waits a uniformly random duration between e.Min and
// the [WaitExponential] value for the same attempt: full jitter (tenacity's
// wait_random_exponential, since 9.0). Concurrent callers that fail together
// spread out instead of retrying in lockstep.
//
// WaitRandomExponential panics on the same parameters as [WaitExponential].
func WaitRandomExponential(e Exponential) Wait {
	return Wait{randExpo{e: e.norm("WaitRandomExponential")}}
}

type randExpo struct {
	stateless
	e Exponential
}

func (w randExpo) next(s State) (time.Duration, bool) { return w.at(s.Attempt, rand.Float64()), false }
func (w randExpo) bounds(s State) (lo, hi time.Duration) {
	return w.at(s.Attempt, 0), w.at(s.Attempt, 1)
}

// at returns the wait after attempt n for the uniform draw u in [0, 1].
func (w randExpo) at(n int, u float64) time.Duration {
	lo := float64(w.e.Min)
	hi := w.e.high(n)
	return w.e.clamp(lo + u*(hi-lo))
}
func (w randExpo) String() string { return "WaitRandomExponential(" + w.e.String() + ")" }

// WaitExponentialJitter waits Multiplier × Base^(n−1) plus a uniformly random
// duration in [0, jitter], then clamps the sum to [e.Min, e.Max]
// (tenacity's wait_exponential_jitter). Once the exponential part reaches
// Max, the wait is exactly Max.
//
// WaitExponentialJitter panics on the parameters [WaitExponential] refuses and
// on a negative jitter.
func WaitExponentialJitter(e Exponential, jitter time.Duration) Wait {
	checkNonNegative("WaitExponentialJitter", "jitter", jitter)
	return Wait{expoJitter{e: e.norm("WaitExponentialJitter"), jitter: jitter}}
}

type expoJitter struct {
	stateless
	e      Exponential
	jitter time.Duration
}

func (w expoJitter) next(s State) (time.Duration, bool) {
	return w.at(s.Attempt, rand.Float64()), false
}
func (w expoJitter) bounds(s State) (lo, hi time.Duration) {
	return w.at(s.Attempt, 0), w.at(s.Attempt, 1)
}

func (w expoJitter) at(n int, u float64) time.Duration {
	return w.e.clamp(float64(w.e.Multiplier)*math.Pow(w.e.Base, float64(n-1)) + u*float64(w.jitter))
}

func (w expoJitter) String() string {
	return fmt.Sprintf("WaitExponentialJitter(%s, jitter=%v)", w.e, w.jitter)
}

// WaitDecorrelatedJitter waits a uniformly random duration between base and
// three times the previous wait (base for the first), capped at limit: the
// "decorrelated jitter" of Marc Brooker's AWS Architecture Blog article on
// backoff. The previous wait is [State.PrevWait], the pause slept before the
// attempt that just ended.
//
// WaitDecorrelatedJitter panics if base is not positive or limit < base.
func WaitDecorrelatedJitter(base, limit time.Duration) Wait {
	if base <= 0 || limit < base {
		panic(fmt.Sprintf("retries: WaitDecorrelatedJitter(%v, %v): need 0 < base <= limit", base, limit))
	}
	return Wait{decorrelated{base: base, max: limit}}
}

type decorrelated struct {
	stateless
	base, max time.Duration
}

func (w decorrelated) next(s State) (time.Duration, bool) {
	return w.at(s.PrevWait, rand.Float64()), false
}
func (w decorrelated) bounds(s State) (lo, hi time.Duration) {
	return w.at(s.PrevWait, 0), w.at(s.PrevWait, 1)
}

func (w decorrelated) at(prev time.Duration, u float64) time.Duration {
	lo := float64(w.base)
	hi := math.Max(lo, 3*float64(prev))
	return clampNanos(lo+u*(hi-lo), w.base, w.max)
}

func (w decorrelated) String() string {
	return fmt.Sprintf("WaitDecorrelatedJitter(base=%v, max=%v)", w.base, w.max)
}

// WaitGoldenJitter waits 0.1 s × 1.618^(n−1) plus a uniformly random duration
// in [0, 1 s] after attempt n: pyvespa's wait_golden_jitter, which
// [SyncRequest] uses. Like pyvespa's, it has no cap; unlike Python, which
// raises OverflowError from attempt 1477 on, it saturates at the largest
// time.Duration (from attempt 54 on).
func WaitGoldenJitter() Wait { return Wait{golden{}} }

type golden struct{ stateless }

func (golden) next(s State) (time.Duration, bool) {
	return golden{}.at(s.Attempt, rand.Float64()), false
}
func (golden) bounds(s State) (lo, hi time.Duration) {
	return golden{}.at(s.Attempt, 0), golden{}.at(s.Attempt, 1)
}

func (golden) at(n int, u float64) time.Duration {
	return fromNanos(1e8*math.Pow(1.618, float64(n-1)) + u*1e9)
}
func (golden) String() string { return "WaitGoldenJitter(0.1s × 1.618^(n−1) + U(0, 1s))" }

// WaitChain uses waits[0] after the first attempt, waits[1] after the second,
// and so on, repeating the last one for every later attempt. Each wait is
// given the real attempt number, as in tenacity's wait_chain, so
// WaitChain(WaitFixed(time.Second), WaitExponential(Exponential{})) waits
// 1 s, 2 s, 4 s, ….
//
// WaitChain panics when called with no waits.
func WaitChain(waits ...Wait) Wait {
	if len(waits) == 0 {
		panic("retries: WaitChain needs at least one wait")
	}
	return Wait{&waitList{chain: true, parts: append([]Wait(nil), waits...)}}
}

// WaitCombine waits the sum of waits, saturating at the largest
// time.Duration: WaitCombine(WaitFixed(time.Second), WaitRandom(0, time.Second))
// waits between 1 s and 2 s. With no waits it does not wait.
func WaitCombine(waits ...Wait) Wait {
	return Wait{&waitList{chain: false, parts: append([]Wait(nil), waits...)}}
}

type waitList struct {
	chain bool
	parts []Wait
}

func (l *waitList) next(s State) (time.Duration, bool) {
	if l.chain {
		i := min(max(s.Attempt, 1), len(l.parts)) - 1
		return l.parts[i].next(s)
	}
	var sum time.Duration
	for _, p := range l.parts {
		d, stop := p.next(s)
		if stop {
			return 0, true
		}
		sum = addSat(sum, d)
	}
	return sum, false
}

func (l *waitList) usesClock() bool {
	for _, p := range l.parts {
		if p.usesClock() {
			return true
		}
	}
	return false
}

func (l *waitList) bounds(s State) (lo, hi time.Duration) {
	if l.chain {
		i := min(max(s.Attempt, 1), len(l.parts)) - 1
		return l.parts[i].Bounds(s)
	}
	for _, p := range l.parts {
		plo, phi := p.Bounds(s)
		lo, hi = addSat(lo, plo), addSat(hi, phi)
	}
	return lo, hi
}

// start gives the list its own per-call parts when one of them keeps state.
func (l *waitList) start() waiter {
	var parts []Wait
	for i, p := range l.parts {
		if p.w == nil {
			continue
		}
		pw := p.w.start()
		if pw == nil {
			continue
		}
		if parts == nil {
			parts = append([]Wait(nil), l.parts...)
		}
		parts[i] = Wait{pw}
	}
	if parts == nil {
		return nil
	}
	return &waitList{chain: l.chain, parts: parts}
}

func (l *waitList) String() string {
	name := "WaitCombine"
	if l.chain {
		name = "WaitChain"
	}
	return name + "(" + joinStrings(l.parts) + ")"
}

// WaitFunc waits what f returns for the state of the attempt that just ended;
// a negative result counts as 0. f runs on the goroutine that called Do and
// must not block.
//
// WaitFunc panics if f is nil.
func WaitFunc(f func(State) time.Duration) Wait {
	if f == nil {
		panic("retries: WaitFunc(nil)")
	}
	return Wait{waitFunc{f: &f}}
}

type waitFunc struct {
	stateless
	f *func(State) time.Duration
}

func (w waitFunc) next(s State) (time.Duration, bool)    { return max((*w.f)(s), 0), false }
func (w waitFunc) bounds(s State) (lo, hi time.Duration) { d, _ := w.next(s); return d, d }
func (w waitFunc) usesClock() bool                       { return true }
func (w waitFunc) String() string                        { return "WaitFunc(" + funcName(*w.f) + ")" }

// WaitBackOff adapts a [backoff.BackOff] from github.com/cenkalti/backoff/v4
// into a Wait. A BackOff keeps state and is not safe for concurrent use, so
// WaitBackOff takes a function that makes one: every call to Do makes a fresh
// BackOff, resets it, and asks it for one NextBackOff per retried attempt.
// When the BackOff returns [backoff.Stop], the policy gives up as if its
// [Stop] had fired.
//
// WaitBackOff panics if newBackOff is nil; Do panics if it returns nil.
func WaitBackOff(newBackOff func() backoff.BackOff) Wait {
	if newBackOff == nil {
		panic("retries: WaitBackOff(nil)")
	}
	return Wait{backOffWait{newB: &newBackOff}}
}

type backOffWait struct {
	newB *func() backoff.BackOff
}

func (w backOffWait) start() waiter {
	b := (*w.newB)()
	if b == nil {
		panic("retries: WaitBackOff: " + funcName(*w.newB) + " returned a nil BackOff")
	}
	b.Reset()
	return &backOffRun{b: b, from: w}
}

// next is used only when a caller asks a shared Wait for a duration; the
// executor always calls start first.
func (w backOffWait) next(s State) (time.Duration, bool) { return w.start().next(s) }
func (w backOffWait) bounds(s State) (lo, hi time.Duration) {
	d, _ := w.next(s)
	return d, d
}
func (w backOffWait) usesClock() bool { return false }
func (w backOffWait) String() string  { return "WaitBackOff(" + funcName(*w.newB) + ")" }

type backOffRun struct {
	b    backoff.BackOff
	from backOffWait
}

func (r *backOffRun) next(State) (time.Duration, bool) {
	d := r.b.NextBackOff()
	if d == backoff.Stop {
		return 0, true
	}
	return max(d, 0), false
}
func (r *backOffRun) bounds(s State) (lo, hi time.Duration) {
	d, _ := r.next(s)
	return d, d
}
func (r *backOffRun) start() waiter   { return nil }
func (r *backOffRun) usesClock() bool { return false }
func (r *backOffRun) String() string  { return r.from.String() }

// fromNanos converts a wait in float nanoseconds to a Duration, saturating:
// NaN and negative values give 0, values at or past the largest Duration give
// the largest Duration.
func fromNanos(ns float64) time.Duration {
	switch {
	case !(ns > 0): // also NaN
		return 0
	case ns >= float64(maxWait): // float64(MaxInt64) rounds up to 2^63
		return maxWait
	}
	return time.Duration(ns)
}

// clampNanos converts v to a Duration in [lo, hi] (lo <= hi), giving lo
// exactly when v <= float64(lo) and hi exactly when v >= float64(hi): past
// 2^53 ns float64(d) is rounded, and fromNanos(float64(d)) may not be d.
func clampNanos(v float64, lo, hi time.Duration) time.Duration {
	switch {
	case v <= float64(lo) || math.IsNaN(v):
		return lo
	case v >= float64(hi):
		return hi
	}
	return min(max(fromNanos(v), lo), hi)
}

// clamp converts v to max(Min, min(v, Max)) exactly: a v that reaches Max
// gives Max (or Min, when Min > Max) even if Min and Max round alike.
func (e Exponential) clamp(v float64) time.Duration {
	if v >= float64(e.Max) {
		return max(e.Max, e.Min)
	}
	return clampNanos(v, e.Min, max(e.Min, e.Max))
}

func capString(d time.Duration) string {
	if d == 0 || d == maxWait {
		return "none"
	}
	return d.String()
}
