package retries

import (
	"fmt"
	"time"
)

// Stop decides when a [Policy] gives up. It is consulted after every attempt
// whose outcome the policy's [Predicate] chose to retry, once the next wait
// has been computed, so it can see [State.Wait].
//
// Stops are immutable values built by the Stop… functions and are safe to
// share. Stops built from the same arguments by StopAfterAttempt,
// StopAfterDelay, StopBeforeDelay and StopNever compare equal with ==.
//
// The zero Stop stops after the first attempt; it is what a zero [Policy]
// uses, so the zero Policy never retries.
type Stop struct {
	s stopper
}

// stopper is what every stop implements. A stop that combines others
// forwards usesClock to them.
type stopper interface {
	stop(s State) bool
	// usesClock reports whether stop reads State.Elapsed, so that Do must
	// keep it current.
	usesClock() bool
	String() string
}

// Check reports whether the stop gives up after the attempt described by s.
func (s Stop) Check(st State) bool {
	return s.check(st)
}

func (s Stop) check(st State) bool {
	if s.s == nil {
		return true
	}
	return s.s.stop(st)
}

// String describes the stop and its parameters, as in
// "StopAfterAttempt(3)".
func (s Stop) String() string {
	if s.s == nil {
		return "StopAfterAttempt(1)"
	}
	return s.s.String()
}

func (s Stop) usesClock() bool { return s.s != nil && s.s.usesClock() }

// StopAfterAttempt stops once n attempts have been made, counting the first:
// n is the total number of calls, not the number of retries. As in
// tenacity, 0 and 1 both mean a single attempt.
//
// StopAfterAttempt panics if n is negative.
func StopAfterAttempt(n int) Stop {
	if n < 0 {
		panic(fmt.Sprintf("retries: StopAfterAttempt(%d): negative attempt count", n))
	}
	return Stop{afterAttempt{n: n}}
}

type afterAttempt struct {
	stateless
	n int
}

func (a afterAttempt) stop(s State) bool { return s.Attempt >= a.n }
func (a afterAttempt) String() string    { return fmt.Sprintf("StopAfterAttempt(%d)", a.n) }

// StopAfterDelay stops once at least d has passed since the first attempt
// ended (see State.Elapsed), measured when an attempt ends (the bound is
// inclusive). It ignores
// the coming wait, so a call can run past d by one wait and one attempt; use
// [StopBeforeDelay] to keep within d.
//
// StopAfterDelay panics if d is negative.
func StopAfterDelay(d time.Duration) Stop {
	checkNonNegative("StopAfterDelay", "d", d)
	return Stop{afterDelay{d: d}}
}

type afterDelay struct{ d time.Duration }

func (a afterDelay) stop(s State) bool { return s.Elapsed >= a.d }
func (afterDelay) usesClock() bool     { return true }
func (a afterDelay) String() string    { return fmt.Sprintf("StopAfterDelay(%v)", a.d) }

// StopBeforeDelay stops when the time since the first attempt ended (see
// State.Elapsed) plus the coming wait would reach d, so the policy never sleeps into a wait it
// could not finish before d (tenacity's stop_before_delay).
//
// StopBeforeDelay panics if d is negative.
func StopBeforeDelay(d time.Duration) Stop {
	checkNonNegative("StopBeforeDelay", "d", d)
	return Stop{beforeDelay{d: d}}
}

type beforeDelay struct{ d time.Duration }

func (b beforeDelay) stop(s State) bool { return addSat(s.Elapsed, s.Wait) >= b.d }
func (beforeDelay) usesClock() bool     { return true }
func (b beforeDelay) String() string    { return fmt.Sprintf("StopBeforeDelay(%v)", b.d) }

// StopNever never gives up. A policy with it retries until an outcome is not
// retryable or the context ends, as [Throttle] does.
func StopNever() Stop { return Stop{never{}} }

type never struct{ stateless }

func (never) stop(State) bool { return false }
func (never) String() string  { return "StopNever()" }

// StopAny stops when any of stops does, checked in order. With no arguments
// it never stops, as tenacity's stop_any().
func StopAny(stops ...Stop) Stop {
	return Stop{&stopCombo{any: true, parts: append([]Stop(nil), stops...)}}
}

// StopAll stops when every one of stops does. With no arguments it stops
// after the first attempt, as tenacity's stop_all().
func StopAll(stops ...Stop) Stop {
	return Stop{&stopCombo{any: false, parts: append([]Stop(nil), stops...)}}
}

type stopCombo struct {
	any   bool
	parts []Stop
}

func (c *stopCombo) stop(s State) bool {
	for _, p := range c.parts {
		if p.check(s) == c.any {
			return c.any
		}
	}
	return !c.any
}

func (c *stopCombo) usesClock() bool {
	for _, p := range c.parts {
		if p.usesClock() {
			return true
		}
	}
	return false
}

func (c *stopCombo) String() string {
	name := "StopAll"
	if c.any {
		name = "StopAny"
	}
	return name + "(" + joinStrings(c.parts) + ")"
}

// StopIf stops when f reports true for the state of the attempt that just
// ended. f runs on the goroutine that called Do and must not block.
//
// StopIf panics if f is nil.
func StopIf(f func(State) bool) Stop {
	if f == nil {
		panic("retries: StopIf(nil)")
	}
	return Stop{stopFunc{f: &f}}
}

type stopFunc struct {
	f *func(State) bool // a pointer keeps the struct comparable
}

func (f stopFunc) stop(s State) bool { return (*f.f)(s) }
func (stopFunc) usesClock() bool     { return true }
func (f stopFunc) String() string    { return "StopIf(" + funcName(*f.f) + ")" }
