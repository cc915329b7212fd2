package retries

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// State describes a call in progress. Stops, waits and predicates built
// from functions, hooks and the exhaustion callback receive it by value.
type State struct {
	// Attempt is the number of the attempt that just ended, from 1; in the
	// before hook, the number of the attempt about to start.
	Attempt int
	// Elapsed is the time since the first attempt ended, measured when the
	// attempt in Attempt ended (in the before hook, when the next one
	// starts): 0 after the first attempt. It counts from the end of the
	// first attempt, not from its start as tenacity does, so that a call
	// that succeeds at once never reads the clock (which costs more here
	// than the rest of such a call); it means the same whatever the
	// policy's options.
	Elapsed time.Duration
	// Slept is the total of the waits slept so far.
	Slept time.Duration
	// Err is the attempt's error; nil if it returned a value.
	Err error
	// Value is the attempt's value in DoValue; always nil in Policy.Do.
	Value any
	// Wait is the pause before the next attempt. Stops, the before-sleep
	// hook and the exhaustion callback see it; waits and the after hook see
	// 0, since it is not yet known.
	Wait time.Duration
	// PrevWait is the pause slept before the attempt that just ended; 0
	// after the first attempt.
	PrevWait time.Duration
	// Policy is the policy's name ([WithName]); "" if it has none.
	Policy string
	// OutageAttempts is the number of attempts that failed while the
	// policy's [Breaker] was open or half-open. They are not counted in
	// Attempt, so that an outage spends none of the call's attempts.
	OutageAttempts int
	// Refusal is why the policy gave up before its Stop did, for the
	// exhaustion callback: [ErrBudgetExhausted] when the policy's [Budget]
	// refused the next retry, [ErrBreakerOpen] when its [Breaker] let no
	// attempt through (it fails fast). It is nil otherwise.
	Refusal error
}

// Option changes one part of a [Policy] in [New] and [Policy.Copy]. Options
// apply in order, so the last one for a part wins.
type Option func(*Policy)

// WithStop sets the policy's [Stop].
func WithStop(s Stop) Option { return func(p *Policy) { p.stop = s } }

// WithWait sets the policy's [Wait].
func WithWait(w Wait) Option { return func(p *Policy) { p.wait = w } }

// WithRetry sets the policy's retry [Predicate].
func WithRetry(pred Predicate) Option { return func(p *Policy) { p.retry = pred } }

// WithReraise sets whether the policy, on giving up, returns the last
// attempt's error itself instead of a [*RetryError] (tenacity's reraise).
// When the last outcome was a retried value there is nothing to re-raise,
// and the policy still returns a *RetryError, as tenacity does. A callback
// set with [WithOnExhausted] takes precedence.
func WithReraise(reraise bool) Option { return func(p *Policy) { p.reraise = reraise } }

// WithOnExhausted sets a callback that decides what Do returns when the
// policy gives up after a retried outcome (tenacity's retry_error_callback):
// Do returns the callback's error, and DoValue returns the last value with
// it. [ReturnLastOutcome] is the callback of [DocV1] and [SyncRequest]. The
// callback runs on the goroutine that called Do. It does not run when the
// context ends the call, nor for an outcome that is not retried. A nil f
// removes the callback.
func WithOnExhausted(f func(State) error) Option {
	return func(p *Policy) { p.onExhausted = f }
}

// ReturnLastOutcome is an exhaustion callback for [WithOnExhausted] that
// gives back the last outcome itself: its error, or, when the last attempt
// returned a retried value, a nil error, so that DoValue returns that value
// (pyvespa's _return_last_outcome: the last 503 response, say).
func ReturnLastOutcome(s State) error { return s.Err }

// WithBefore sets a hook that runs before every attempt, with the number of
// the attempt about to start (tenacity's before), and the call's context. A
// nil f removes it.
func WithBefore(f func(context.Context, State)) Option { return func(p *Policy) { p.before = f } }

// WithAfter sets a hook that runs after every attempt whose outcome is
// retried, the last one included, before the wait is computed (tenacity's
// after), with the call's context. It runs also when the context has ended
// the call. A nil f removes it.
func WithAfter(f func(context.Context, State)) Option { return func(p *Policy) { p.after = f } }

// WithBeforeSleep sets a hook that runs before every wait, with the wait in
// State.Wait (tenacity's before_sleep) and the call's context. It does not
// run after the last attempt, nor when the wait is skipped because it would
// end past the context's deadline or the policy's [Budget] refuses the
// retry. [LogRetries] makes one that logs. A nil f removes it.
func WithBeforeSleep(f func(context.Context, State)) Option {
	return func(p *Policy) { p.beforeSleep = f }
}

// WithDiscard sets the function that releases a retried value the caller
// will never see. It runs just before the next attempt starts, after the
// wait; it never sees the value that Do or DoValue returns, nor a value
// still pending when the context ends the call (nor, when the context ends
// while it runs, is another attempt started). The default releases a
// [*http.Response]: it reads up to 4 KiB of the body and closes it, so the
// connection goes back to the pool; a body that has not delivered that
// within 100 ms (or the attempt's time limit, from [WithAttemptTimeout], if
// shorter) is closed at once, so a stalled body never holds up the next
// attempt. A panic that unwinds Do also discards a value still pending. A
// nil f restores the default.
func WithDiscard(f func(v any)) Option { return func(p *Policy) { p.discard = f } }

// Stop returns the policy's [Stop].
func (p Policy) Stop() Stop { return p.stop }

// Wait returns the policy's [Wait].
func (p Policy) Wait() Wait { return p.wait }

// Retry returns the policy's retry [Predicate].
func (p Policy) Retry() Predicate { return p.retry }

// String describes the policy's name ([WithName], when it has one) and
// parts, as in "Policy{name: "ControlPlane", stop: StopAfterAttempt(3),
// wait: …, retry: RetryIfAnyError(), on exhaustion: …}"; the zero Policy
// is "Policy{stop: StopAfterAttempt(1), wait: WaitNone(), retry:
// RetryIfAnyError(), on exhaustion: RetryError}".
func (p Policy) String() string {
	var b strings.Builder
	b.WriteString("Policy{")
	if name := p.Name(); name != "" {
		fmt.Fprintf(&b, "name: %q, ", name)
	}
	fmt.Fprintf(&b, "stop: %v, wait: %v, retry: %v, on exhaustion: ", p.stop, p.wait, p.retry)
	switch {
	case p.onExhausted != nil:
		b.WriteString(funcName(p.onExhausted))
	case p.reraise:
		b.WriteString("reraise")
	default:
		b.WriteString("RetryError")
	}
	var hooks []string
	for _, h := range []struct {
		name string
		set  bool
	}{{"before", p.before != nil}, {"after", p.after != nil}, {"before sleep", p.beforeSleep != nil}, {"discard", p.discard != nil}} {
		if h.set {
			hooks = append(hooks, h.name)
		}
	}
	if len(hooks) > 0 {
		b.WriteString(", hooks: " + strings.Join(hooks, ", "))
	}
	if p.shared.budget != nil {
		fmt.Fprintf(&b, ", budget: NewBudget(%g, %g)", p.shared.budget.ratio, p.shared.budget.minPerSecond)
	}
	if p.shared.breaker != nil {
		b.WriteString(", breaker")
	}
	if p.shared.limiter != nil {
		b.WriteString(", limiter")
	}
	b.WriteString("}")
	return b.String()
}
