package retries

import (
	"context"
	"time"
)

// shared holds the objects that a policy and its copies share with every
// other call that uses them: a [Budget], a [Breaker] and a [Limiter]. Each
// owns its synchronisation. This is the one place the call loop consults
// them, at six points of a call:
//
//   - start: a call begins (the budget earns a deposit);
//   - admit: an attempt is about to start (the breaker lets it through or
//     holds it, then the limiter paces it); lends and firstTicket are its
//     fast form, for a first attempt that need not wait;
//   - report: the attempt ended, and the predicate judged it (the breaker
//     and the limiter learn from its outcome); succeeded is its fast form,
//     for a Do's success;
//   - drop: the attempt ended with nothing to learn (a permanent error, a
//     panic);
//   - allowsRetry: a retry is decided, before its wait (the budget may refuse);
//   - payRetry: the wait is over and the retry starts (the budget pays for it).
//
// What they lend an attempt is a ticket, which the loop holds and hands
// back, but never opens. A new shared object adds its field here, its
// lines in the methods above, its fields in ticket, its refusal's reason
// in refusalOutcome (and an Outcome for it), and nothing in the loop.
type shared struct {
	budget  *Budget
	breaker *Breaker
	limiter *Limiter
}

// ticket is what the shared objects lend one attempt, to be handed back
// with its outcome: a limiter's permit, and whether the breaker let it
// through as a probe.
type ticket struct {
	permit   Permit
	front    bool // the last attempt met backpressure: the next waits at the limiter's front
	admitted bool // the breaker admitted the attempt
	probe    bool
	held     time.Duration // how long the breaker held it, for an observer
	queued   time.Duration // how long it waited for the limiter, when timed
	timed    bool          // time the wait for the limiter: an observer hears of it
}

// holdsPermit reports whether t holds a limiter's permit.
func (t *ticket) holdsPermit() bool { return t.permit.l != nil }

// guarded reports whether an attempt with t must run under a deferred
// release: t holds what a panic would leak (a limiter's permit; a closed
// breaker's admission leaks nothing).
func (t *ticket) guarded() bool { return t.holdsPermit() }

// owes reports whether t must be handed back with its attempt's outcome
// (to report, or to drop on a panic): it holds a permit, or the breaker
// admitted the attempt.
func (t *ticket) owes() bool { return t.holdsPermit() || t.admitted }

// takeHeld returns how long the breaker held t's attempt back, and why,
// and clears it: an observer hears of each hold once.
func (t *ticket) takeHeld() (time.Duration, error) {
	d := t.held
	t.held = 0
	return d, ErrBreakerOpen
}

// succeeded hands back t after an attempt of Do that succeeded, when only
// a limiter's permit is in it: a Do's success tells the limiter nothing
// else, so the permit's own fast path releases it. It reports false, with
// t untouched, when a breaker admitted the attempt: then report does.
func (s *shared) succeeded(t *ticket) bool {
	if t.admitted {
		return false
	}
	t.permit.release(SignalSuccess, 0)
	t.permit = Permit{}
	return true
}

// start is called once per call, before its first attempt.
func (s *shared) start() {
	if s.budget != nil {
		s.budget.deposit()
	}
}

// lends reports whether an attempt needs a ticket: a breaker or a limiter
// is set.
func (s *shared) lends() bool { return s.breaker != nil || s.limiter != nil }

// firstTicket sets in t, which is empty, the ticket of a first attempt
// that may start at once, on the call loop's fast path: the breaker is
// closed (or absent), and the limiter (if any) grants a permit on its own
// fast path. It returns false, with t empty, when admission must wait or
// decide: the loop's admit does it.
func (s *shared) firstTicket(t *ticket) bool {
	if b := s.breaker; b != nil {
		if !b.closed.Load() {
			return false
		}
		t.admitted = true
	}
	if l := s.limiter; l != nil && !l.tryFast(&t.permit) {
		t.admitted = false
		return false
	}
	return true
}

// admit waits until an attempt may start, and sets its ticket in t. It
// returns why the attempt may not start: ErrBreakerOpen when the breaker
// refused it, or held it until ctx ended; nil when it may start, or when
// ctx ended while the limiter paced it (the caller reads ctx).
//
// An attempt that waited for the limiter while the breaker opened goes back
// to wait for the breaker, unless it is the probe: the limiter's queue
// never sends a burst into an outage.
func (s *shared) admit(ctx context.Context, t *ticket) (refusal error) {
	for {
		b := s.breaker
		if b != nil {
			if !b.closed.Load() {
				// A permit handed to the call would be held while the
				// breaker holds the attempt: give it back first.
				if p, ok := s.takeHanded(ctx); ok {
					p.Release(SignalIgnore)
				}
			}
			probe, held, err := b.admit(ctx.Done())
			t.held += held
			switch err {
			case nil:
				t.admitted, t.probe = true, probe
			case errBreakerWait:
				return ErrBreakerOpen
			default:
				return err
			}
		}
		if s.limiter == nil {
			return nil
		}
		if p, ok := s.takeHanded(ctx); ok {
			if t.held == 0 {
				t.permit = p
				return nil
			}
			p.Release(SignalIgnore) // held since it was handed
		}
		var err error
		var since time.Time
		if t.timed {
			since = time.Now()
		}
		if t.front {
			t.front = false
			t.permit, err = s.limiter.acquireSlow(ctx, true)
		} else {
			t.permit, err = s.limiter.Acquire(ctx)
		}
		if t.timed {
			t.queued += time.Since(since)
		}
		if err != nil {
			s.drop(t)
			return nil
		}
		if b == nil || t.probe || b.closed.Load() {
			return nil
		}
		s.drop(t)
	}
}

// attemptOutcome is how an attempt ended, for the shared objects.
type attemptOutcome struct {
	v       any   // the value; nil for an error, or in Do
	err     error // the attempt's error
	retried bool  // the predicate retries it
	ctxDone bool  // the call's context had ended
}

// success is the outcome of a first attempt that succeeded with v, which
// nothing retries.
func success(v any) attemptOutcome { return attemptOutcome{v: v} }

// report hands back t with the outcome of its attempt. It reports whether
// the next attempt is paced by a shared object, so that the call need not
// wait on its own, and whether the attempt failed during an outage, so
// that it spends none of the call's attempts.
func (s *shared) report(t *ticket, o attemptOutcome) (paced, outage bool) {
	if t.admitted {
		outage = s.breaker.report(t.probe, s.breaker.judge(o.v, o.err, o.retried, o.ctxDone))
		t.admitted, t.probe = false, false
	}
	if t.holdsPermit() {
		paced = s.reportPermit(t, o.v, o.err, o.retried)
	}
	return paced || outage, outage
}

// refusalOutcome is the Outcome of a call that a shared object refused,
// by the refusal's reason.
func refusalOutcome(refusal error) Outcome {
	if refusal == ErrBreakerOpen {
		return OutcomeBreakerOpen
	}
	return OutcomeBudgetRefused
}

// reportPermit releases t's permit with what the outcome tells the limiter.
// Backpressure with a Retry-After header also holds the limiter back for
// that long (capped), so that no call sends an attempt before it.
func (s *shared) reportPermit(t *ticket, v any, err error, retried bool) (paced bool) {
	sig := SignalSuccess
	var hold time.Duration
	switch {
	case retried && s.limiter.backpressure(v, err):
		sig, paced, t.front = SignalBackpressure, true, true
		hold, _ = retryAfterHint(State{Value: v, Err: err})
	case retried:
		sig = SignalFailure
	case err != nil:
		sig = SignalIgnore
	case v != nil:
		sig = successSignal(v)
	}
	t.permit.release(sig, hold)
	t.permit = Permit{}
	return paced
}

// drop hands back t with no outcome to learn from: the attempt's error was
// permanent, or a panic unwinds the call.
func (s *shared) drop(t *ticket) {
	if t.admitted {
		s.breaker.report(t.probe, breakerNeutral)
		t.admitted, t.probe = false, false
	}
	if t.permit.l != nil {
		t.permit.Release(SignalIgnore)
		t.permit = Permit{}
	}
}

// allowsRetry returns why a retry that has been decided may not happen
// ([ErrBudgetExhausted]), or nil. A retry after an outage's failure is
// free.
func (s *shared) allowsRetry(outage bool) error {
	if s.budget != nil && !outage && !s.budget.allows() {
		return ErrBudgetExhausted
	}
	return nil
}

// payRetry pays for a retry once its wait is over, or returns why it may not
// happen after all. A retry after an outage's failure is free.
func (s *shared) payRetry(outage bool) error {
	if s.budget != nil && !outage && !s.budget.withdraw() {
		return ErrBudgetExhausted
	}
	return nil
}

// successSignal is what an outcome that is not retried and has no error
// tells a limiter: a success, unless it is a 5xx response that this layer
// does not retry (a proxy's 502 below a layer that does), which still says
// the server is struggling.
func successSignal(v any) Signal {
	if code, ok := statusOf(v, nil); ok && code >= 500 && code <= 599 {
		return SignalFailure
	}
	return SignalSuccess
}
