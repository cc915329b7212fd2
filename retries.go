// Package retries calls a function again when it fails, following an
// immutable [Policy]: the Go counterpart of pyvespa's vespa.retries module.
//
// A Policy has a [Stop] that decides when to give up, a [Wait] that decides
// how long to pause between attempts, a [Predicate] that decides which
// outcomes are worth another attempt, a rule for what comes back when it
// gives up, and optional hooks. [Policy.Do] runs a function under a Policy,
// and [DoValue] does the same for a function that returns a value:
//
//	resp, err := retries.DoValue(ctx, retries.DocV1, send)
//
// The seven policies of pyvespa are package variables with exactly its
// numbers: [Query], [DocV1], [Throttle], [SyncRequest], [Visit],
// [ControlPlane] and [URLValidation]. Policies are values: [Policy.Copy]
// returns a changed copy and leaves the original alone, so they can be shared
// and adapted:
//
//	p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(4)))
//
// [NewTransport] runs every request of an [http.Client] under a Policy, and
// [WaitRetryAfter] honours a server's Retry-After header.
//
// Under overload, two shared objects keep clients from making it worse: a
// [Budget] ([WithBudget]) caps retries as a share of the traffic, and a
// [Limiter] ([WithLimiter]) learns how much a server can take from its 429s
// and latency and paces attempts to that.
//
// A Policy is safe for concurrent use by multiple goroutines: each call to
// Do keeps its own state.
//
// # Errors
//
// What Do returns when it gives up depends on the policy, as in tenacity: a
// [*RetryError] that wraps the last attempt's error (the default, [Query],
// [Visit]), the last error itself ([WithReraise]: [ControlPlane],
// [URLValidation]), or whatever a callback makes of the last outcome
// ([WithOnExhausted] with [ReturnLastOutcome]: [DocV1], [SyncRequest]). An
// error that is not retried comes back at once, unwrapped. When the context
// ends the call, the error is a *RetryError that matches, with [errors.Is],
// both the context's error and the last attempt's error.
//
// # Differences from pyvespa
//
// Do never retries once the caller's context is done, so a cancellation is
// never swallowed; it never sleeps past the context's deadline; and waits
// saturate instead of overflowing. [IsConnectionError] classifies errors by
// type, not by message. The README lists every difference.
package retries

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy says how to retry a function: when to give up, how long to wait,
// which outcomes to retry, what to return on giving up, and which hooks to
// call. Build one with [New] or derive one from another with [Policy.Copy].
//
// A Policy is a small value with no mutable state of its own: assigning it
// copies it, and two copies share only the [Budget] and [Limiter] they were
// given, which are meant to be shared and synchronise themselves. It is
// safe for concurrent use by multiple goroutines.
//
// The zero Policy makes a single attempt (it never retries) and waits
// nothing. Its predicate is [RetryIfAnyError] and it gives up with a
// [*RetryError], so a failed attempt comes back wrapped in one; set a
// [Stop] with [WithStop] to allow more attempts.
type Policy struct {
	stop    Stop
	wait    Wait
	retry   Predicate
	reraise bool

	onExhausted func(State) error

	before, after, beforeSleep func(context.Context, State)
	discard                    func(any)

	// Shared by every copy: each owns its synchronisation.
	budget  *Budget
	limiter *Limiter

	// Derived from the fields above by Copy, so Do need not ask.
	clockEach  bool // keep State.Elapsed current after every attempt
	valueRetry bool // the predicate may retry a successful outcome
}

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
	// Refusal is why the policy gave up before its Stop did, for the
	// exhaustion callback: [ErrBudgetExhausted] when the policy's [Budget]
	// refused the next retry. It is nil otherwise.
	Refusal error
}

// Option changes one part of a [Policy] in [New] and [Policy.Copy]. Options
// apply in order, so the last one for a part wins.
type Option func(*Policy)

// New returns a Policy built from the zero Policy and opts.
func New(opts ...Option) Policy {
	return Policy{}.Copy(opts...)
}

// Copy returns a copy of p with opts applied. It never changes p, so
//
//	retries.DocV1 = retries.DocV1.Copy(retries.WithWait(retries.WaitNone()))
//
// is how a test removes DocV1's waits, and
//
//	retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(n + 1)))
//
// is how a client allows n retries.
func (p Policy) Copy(opts ...Option) Policy {
	for _, o := range opts {
		if o != nil {
			o(&p)
		}
	}
	p.clockEach = p.stop.usesClock() || p.wait.usesClock() ||
		p.before != nil || p.after != nil || p.beforeSleep != nil || p.onExhausted != nil
	p.valueRetry = p.retry.onValue()
	return p
}

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

// String describes the policy's parts, as in
// "Policy{stop: StopAfterAttempt(3), wait: WaitNone(), retry:
// RetryIfAnyError(), on exhaustion: RetryError}".
func (p Policy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Policy{stop: %v, wait: %v, retry: %v, on exhaustion: ", p.stop, p.wait, p.retry)
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
	if p.budget != nil {
		fmt.Fprintf(&b, ", budget: NewBudget(%g, %g)", p.budget.ratio, p.budget.minPerSecond)
	}
	if p.limiter != nil {
		b.WriteString(", limiter")
	}
	b.WriteString("}")
	return b.String()
}

// Do calls fn until it succeeds, its outcome is not retried, the policy
// gives up, or ctx ends; see [DoValue], whose rules it follows with no
// value.
//
// Do panics if ctx or fn is nil.
func (p Policy) Do(ctx context.Context, fn func(context.Context) error) error {
	if fn == nil {
		panic("retries: Policy.Do with a nil function")
	}
	_, err := run(ctx, &p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, false)
	return err
}

// DoValue calls fn under p until it succeeds, its outcome is not retried,
// p gives up, or ctx ends, and returns the last value fn returned with:
//   - a nil error, when an attempt succeeded and p does not retry its value;
//   - the attempt's error itself, when p does not retry it;
//   - the inner error, unwrapped, when fn returned [Permanent](err);
//   - what p's exhaustion rule gives, when p gave up (its Stop fired, or
//     its [Budget] refused the next retry): a [*RetryError], the last error
//     ([WithReraise]), or the callback's error ([WithOnExhausted]);
//   - a [*RetryError] that matches both the context's error and the last
//     attempt's error, when ctx ended the call: during a wait, during an
//     attempt whose outcome was retryable, or because the next wait would
//     end at or after ctx's deadline (then the error matches
//     [context.DeadlineExceeded] although ctx is not yet done).
//
// If ctx is already done, fn is not called and DoValue returns ctx's error;
// ctx is checked again right before every attempt, so no attempt starts
// with a done ctx. A panic in fn, a hook, a stop, a wait or a predicate
// propagates and is not retried; a retried value still pending is
// discarded, and a [Limiter] permit released, as it unwinds. DoValue never
// retries once ctx is done, whatever the predicate says.
//
// DoValue panics if ctx or fn is nil.
func DoValue[T any](ctx context.Context, p Policy, fn func(context.Context) (T, error)) (T, error) {
	if fn == nil {
		panic("retries: DoValue with a nil function")
	}
	return run(ctx, &p, fn, true)
}

// run is the retry loop shared by Do and DoValue. hasValue is false for Do,
// whose T is struct{} and whose values are never shown to predicates.
func run[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), hasValue bool) (T, error) {
	if ctx == nil {
		panic("retries: nil Context")
	}
	var zero T
	if ctx.Err() != nil {
		return zero, errBeforeStart(ctx)
	}
	if p.budget != nil {
		p.budget.deposit()
	}
	if p.before != nil {
		return loop(ctx, p, fn, hasValue, false, false, zero, nil, Permit{})
	}
	if p.limiter == nil {
		// The first attempt runs here, outside the loop's deferred release
		// of what a call holds, so that a first-try success costs little
		// more than the call itself.
		v, err := fn(ctx)
		if err == nil && (!p.valueRetry || !p.retry.match(box(v, hasValue), nil)) {
			return v, nil
		}
		// A value that reached here was matched and is retried; an error
		// is yet to be matched.
		return loop(ctx, p, fn, hasValue, true, err == nil, v, err, Permit{})
	}
	// With a limiter, the first attempt holds a permit, which a panic in fn
	// must not leak.
	permit, err := p.limiter.Acquire(ctx)
	if err != nil {
		return zero, errBeforeStart(ctx)
	}
	held := true
	defer func() {
		if held {
			permit.Release(SignalIgnore)
		}
	}()
	v, err := fn(ctx)
	held = false
	if err == nil && (!p.valueRetry || !p.retry.match(box(v, hasValue), nil)) {
		permit.Release(successSignal(box(v, hasValue)))
		return v, nil
	}
	return loop(ctx, p, fn, hasValue, true, err == nil, v, err, permit)
}

// loop runs the attempts of a call. When first is true, the first attempt
// has run already, v and err are its outcome and permit is the permit it
// holds, if any; when retried is true too, the predicate has already
// retried that outcome.
func loop[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), hasValue, first, retried bool, v T, err error, permit Permit) (T, error) {
	var zero T
	var (
		st      State
		start   time.Time // the end of the first attempt
		w       waiter    // this call's wait, begun at the first retry
		waitSet bool
		pending any // a retried value neither released nor handed back yet
	)
	// A panic in a hook, a stop, a wait, a predicate or fn unwinds through
	// here: release what the call holds, then let the panic go on. Every
	// return clears pending and permit first.
	defer func() {
		if permit.l != nil {
			permit.Release(SignalIgnore)
		}
		if pending != nil {
			p.discardValue(pending)
		}
	}()
	for {
		st.Attempt++
		if first {
			first = false
		} else {
			if p.before != nil {
				p.before(ctx, State{Attempt: st.Attempt, Elapsed: p.since(start), Slept: st.Slept, PrevWait: st.PrevWait})
			}
			if p.limiter != nil {
				var aerr error
				if permit, aerr = p.limiter.Acquire(ctx); aerr != nil {
					if st.Attempt--; st.Attempt == 0 {
						return zero, errBeforeStart(ctx)
					}
					return zero, ctxEnded(ctx, p.settle(&st, start), nil)
				}
			}
			v, err = fn(ctx)
			if err == nil && !p.valueRetry {
				if permit.l != nil {
					p.release(&permit, successSignal(box(v, hasValue)))
				}
				return v, nil
			}
		}
		if err != nil {
			if inner, ok := findPermanent(err); ok {
				p.release(&permit, SignalIgnore)
				return v, inner
			}
		}
		// Only a successful attempt has a value: an error's companion
		// value (usually the zero value) is neither shown nor discarded.
		var boxed any
		if err == nil {
			boxed = box(v, hasValue)
		}
		retry := retried || p.retry.match(boxed, err)
		retried = false
		backpressure := false
		if permit.l != nil {
			sig := SignalSuccess
			switch {
			case retry && p.limiter.backpressure(boxed, err):
				sig, backpressure = SignalBackpressure, true
			case retry:
				sig = SignalFailure
			case err != nil:
				sig = SignalIgnore
			default:
				sig = successSignal(boxed)
			}
			p.release(&permit, sig)
		}
		if !retry {
			return v, err
		}
		if boxed != nil && !isNilPointer(boxed) {
			pending = boxed
		}

		// Elapsed counts from the end of the first attempt, so a call that
		// succeeds at once never reads the clock. After later attempts the
		// clock is read only when something looks at State.Elapsed.
		if start.IsZero() {
			start = time.Now()
		} else if p.clockEach {
			st.Elapsed = time.Since(start)
		}
		st.Err, st.Value, st.Wait = err, boxed, 0
		if p.after != nil {
			p.after(ctx, st)
		}
		if ctx.Err() != nil {
			pending = nil
			return v, ctxEnded(ctx, p.settle(&st, start), nil)
		}
		if !waitSet {
			w, waitSet = p.wait.begin(), true
		}
		d, stop := time.Duration(0), false
		if w != nil {
			d, stop = w.next(st)
		}
		if backpressure {
			d = 0 // the limiter paces this retry in Acquire
		}
		st.Wait = d
		if stop || p.stop.check(st) {
			pending = nil
			return v, p.exhausted(p.settle(&st, start))
		}
		if dl, ok := ctx.Deadline(); ok && d >= time.Until(dl) {
			pending = nil
			return v, ctxEnded(ctx, p.settle(&st, start), context.DeadlineExceeded)
		}
		if p.budget != nil && !p.budget.allows() {
			pending = nil
			return v, p.refused(&st, start)
		}
		if p.beforeSleep != nil {
			p.beforeSleep(ctx, st)
		}
		if !sleep(ctx, d) {
			pending = nil
			return v, ctxEnded(ctx, p.settle(&st, start), nil)
		}
		st.Slept = addSat(st.Slept, d)
		st.PrevWait = d
		if p.budget != nil && !p.budget.withdraw() {
			pending = nil
			return v, p.refused(&st, start)
		}
		if pending != nil {
			p.discardValue(pending)
			pending = nil
		}
		// The context may have ended while the value was released: never
		// start an attempt with a done context.
		if ctx.Err() != nil {
			return v, ctxEnded(ctx, p.settle(&st, start), nil)
		}
	}
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

// box returns v as the value predicates see: nil in Do, which has none.
func box[T any](v T, hasValue bool) any {
	if !hasValue {
		return nil
	}
	return v
}

// release hands back the permit of the attempt that just ended.
func (p *Policy) release(permit *Permit, s Signal) {
	if permit.l != nil {
		permit.Release(s)
		*permit = Permit{}
	}
}

// refused ends a call whose budget refused its next retry, with the
// policy's exhaustion rule.
func (p *Policy) refused(st *State, start time.Time) error {
	st.Refusal = ErrBudgetExhausted
	return p.exhausted(p.settle(st, start))
}

// since returns the time since start, or 0 before the first attempt ended.
func (p *Policy) since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}

// settle brings st.Elapsed up to date before the call ends, when the loop
// did not keep it current, and returns st.
func (p *Policy) settle(st *State, start time.Time) *State {
	if !p.clockEach {
		st.Elapsed = time.Since(start)
	}
	return st
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (p *Policy) discardValue(v any) {
	if p.discard != nil {
		p.discard(v)
		return
	}
	if r, ok := v.(*http.Response); ok {
		discardBody(r)
	}
}

// exhausted applies the policy's exhaustion rule to the last outcome.
func (p *Policy) exhausted(st *State) error {
	switch {
	case p.onExhausted != nil:
		return p.onExhausted(*st)
	case p.reraise && st.Err != nil:
		return st.Err
	}
	return newRetryError(st, nil, nil)
}

// Permanent wraps err so that Do returns err at once, unwrapped, whatever
// the policy's predicate says. It returns nil for a nil err. It wraps err in
// backoff v4's [backoff.PermanentError], so code that already uses
// backoff.Permanent works unchanged; Do also recognises the PermanentError
// of backoff's later majors (v5 and up), whose type differs, so permanent
// errors from code written for them are not retried either.
//
// Do looks for a permanent error through at most 100 wrapped errors, so an
// error whose Unwrap returns itself, or a cycle of wrapped errors, cannot
// make it spin. Predicates built on [errors.Is] and [errors.As], such as
// [RetryIfErrorIs], have no such bound and would spin on such an error.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return backoff.Permanent(err)
}

// maxUnwrap bounds the walk of an error's tree in findPermanent: an error
// whose Unwrap returns itself, or a cycle, would otherwise make every
// retried call spin for ever. errors.Is and errors.As have no such bound,
// so predicates built on them still spin on such an error.
const maxUnwrap = 100

// findPermanent returns the error wrapped by the first permanent error in
// err's tree (backoff v4's *PermanentError, or that of a later major), and
// whether there was one. It walks at most maxUnwrap errors, depth first, and
// avoids errors.As, which would allocate its target.
func findPermanent(err error) (error, bool) {
	budget := maxUnwrap
	return walkPermanent(err, &budget)
}

func walkPermanent(err error, budget *int) (error, bool) {
	for err != nil {
		if *budget--; *budget < 0 {
			return nil, false
		}
		switch e := err.(type) {
		case *backoff.PermanentError:
			return e.Err, true
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if pe, ok := walkPermanent(inner, budget); ok {
					return pe, true
				}
			}
			return nil, false
		case interface{ Unwrap() error }:
			if isLaterBackoffPermanent(err) {
				return e.Unwrap(), true
			}
			err = e.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}

// isLaterBackoffPermanent reports whether err is a *PermanentError of
// github.com/cenkalti/backoff/v5 or a later major, recognised by its type's
// name and package so that this package need not depend on them.
func isLaterBackoffPermanent(err error) bool {
	t := reflect.TypeOf(err)
	if t.Kind() != reflect.Pointer || t.Elem().Name() != "PermanentError" {
		return false
	}
	pkg, ok := strings.CutPrefix(t.Elem().PkgPath(), "github.com/cenkalti/backoff/v")
	return ok && pkg != "" && pkg != "4" && isDigits(pkg)
}
