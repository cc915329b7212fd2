package retries

import (
	"context"
	"net/http"
	"time"
)

// run is the retry loop shared by DoValue, which passes fn, and Do, which
// passes do (and T struct{}): its values are never shown to predicates.
func run[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), do func(context.Context) error) (T, error) {
	if ctx == nil {
		panic("retries: nil Context")
	}
	var v T
	if ctx.Err() != nil {
		return v, errBeforeStart(ctx)
	}
	if o := p.observer(); o != nil {
		return runObserved(ctx, p, fn, do, o)
	}
	p.shared.start()
	var t ticket
	if p.before != nil || (p.shared.lends() && !p.shared.firstTicket(&t)) {
		c := call{ctx: ctx, hasValue: do == nil}
		return loop(&c, p, fn, do, v, nil, false)
	}
	if t.guarded() {
		return firstGuarded(ctx, p, fn, do, &t)
	}
	// The fast path: with nothing to call before an attempt and nothing
	// held for it (a closed breaker lends nothing that a panic could
	// leak), the first attempt runs here, before the call's state exists
	// and outside its deferred release, so that a first-try success costs
	// little more than fn.
	v, err := attempt(ctx, fn, do)
	if acceptsAtOnce(p, v, err, do == nil) {
		if t.owes() {
			p.shared.report(&t, success(box(v, do == nil)))
		}
		return v, nil
	}
	return resume(ctx, p, fn, do, v, err, &t)
}

// attempt calls the caller's function once: do for Do, fn for DoValue.
// It is the one place the call calls it.
func attempt[T any](ctx context.Context, fn func(context.Context) (T, error), do func(context.Context) error) (v T, err error) {
	if do != nil {
		return v, do(ctx)
	}
	return fn(ctx)
}

// acceptsAtOnce reports whether a first attempt's outcome ends the call
// as a success with nothing more to judge: no error, and no value
// predicate that retries the value.
func acceptsAtOnce[T any](p *Policy, v T, err error, hasValue bool) bool {
	return err == nil && (!p.valueRetry || acceptsValue(p, v, hasValue))
}

// acceptsValue reports whether p's predicate leaves a successful value
// alone. It is kept out of acceptsAtOnce, so that the fast path inlines.
//
//go:noinline
func acceptsValue[T any](p *Policy, v T, hasValue bool) bool {
	return !p.retry.match(box(v, hasValue), nil)
}

// firstGuarded is the fast path of a first attempt whose ticket t is
// guarded (it holds a limiter's permit): a panic in fn or a predicate
// releases what t still holds, which report and the loop take over. It is a path of its own because it
// pays: sending such a call through the loop instead cost 27 % more on
// BenchmarkDoLimiter (commit f80d6d4).
func firstGuarded[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), do func(context.Context) error, t *ticket) (v T, err error) {
	defer func() {
		if t.owes() {
			p.shared.drop(t)
		}
	}()
	v, err = attempt(ctx, fn, do)
	if do != nil && err == nil && !p.valueRetry && p.shared.succeeded(t) {
		return v, nil // Do's success, handed back on the shared objects' fast path
	}
	if acceptsAtOnce(p, v, err, do == nil) {
		p.shared.report(t, success(box(v, do == nil)))
		return v, nil
	}
	return resume(ctx, p, fn, do, v, err, t)
}

// resume goes on, in the loop, with a call whose first attempt ran on the
// fast path with the outcome v, err and the ticket t, which the loop takes.
func resume[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), do func(context.Context) error, v T, err error, t *ticket) (T, error) {
	c := call{ctx: ctx, hasValue: do == nil, retried: err == nil, ticket: *t}
	*t = ticket{}
	c.st.Attempt = 1
	return loop(&c, p, fn, do, v, err, true)
}

// runObserved runs a call whose policy has an observer, which sees it start,
// each attempt, each wait, each refusal and its end; it never takes the
// fast path.
func runObserved[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), do func(context.Context) error, o *Observer) (T, error) {
	begin := time.Now()
	if o.Start != nil {
		if c := o.Start(ctx, CallInfo{Policy: p.meta.name}); c != nil {
			ctx = c
		}
	}
	p.shared.start()
	c := call{ctx: ctx, hasValue: do == nil, obs: o}
	c.ticket.timed = o.Attempt != nil
	var v T
	v, err := loop(&c, p, fn, do, v, nil, false)
	if o.Done != nil {
		o.Done(ctx, CallDone{Policy: p.meta.name, Outcome: c.outcome, Attempts: c.st.Attempt, OutageAttempts: c.st.OutageAttempts,
			Elapsed: time.Since(begin), Value: box(v, c.hasValue), Err: err})
	}
	return v, err
}

// loop runs attempts of fn (DoValue) or do (Do) until one ends the call,
// each in three steps: admission, the attempt and its judgement, then the
// pause before the next. With ran, the first attempt has run already, and
// v and err are its outcome. It is the only part of a call that knows T.
func loop[T any](c *call, p *Policy, fn func(context.Context) (T, error), do func(context.Context) error, v T, err error, ran bool) (T, error) {
	// A panic in a hook, a stop, a wait, a predicate or fn unwinds through
	// here: release what the call holds, then let the panic go on. Every
	// return clears pending and the ticket first.
	defer c.unwind(p)
	if p.meta != nil {
		c.st.Policy = p.meta.name
	}
	for {
		if !ran {
			if end, err := c.admit(p); end {
				return v, err
			}
			if c.obs != nil && c.obs.Attempt != nil {
				c.attemptAt = time.Now()
			}
			v, err = attempt(c.ctx, fn, do)
		}
		ran = false
		if !c.retried {
			if acceptsAtOnce(p, v, err, c.hasValue) {
				p.shared.report(&c.ticket, success(box(v, c.hasValue)))
				if c.obs != nil {
					c.observeAttempt(p, nil, false)
				}
				return v, nil
			}
			c.retried = err == nil // the value predicate has retried this success
		}
		// Only a successful attempt has a value: an error's companion
		// value (usually the zero value) is neither shown nor discarded.
		var boxed any
		if err == nil {
			boxed = box(v, c.hasValue)
		}
		if end, err := c.judge(p, boxed, err); end {
			return v, err
		}
		if end, err := c.pause(p); end {
			return v, err
		}
	}
}

// call is the state of one call of Do or DoValue past its fast path. The
// policy and the caller's function are passed to its steps rather than
// kept in it: escape analysis does not tell a struct's fields apart, and
// the context and values, which leak into the caller's functions, would
// take the caller's Policy, or the closure that is fn, to the heap with
// them.
type call struct {
	ctx      context.Context
	hasValue bool // DoValue: values are shown to predicates

	st      State
	retried bool      // the predicate has already retried the outcome to judge
	start   time.Time // the end of the first attempt
	w       waiter    // this call's wait, begun at the first retry
	waitSet bool
	paced   bool   // a shared object paces the next attempt: no wait of its own
	outage  bool   // the last attempt failed during an outage: it spends nothing
	pending any    // a retried value neither released nor handed back yet
	ticket  ticket // what the shared objects lent the attempt in flight

	obs       *Observer     // the policy's, or nil
	outcome   Outcome       // how the call ended, for obs
	attemptAt time.Time     // when the attempt in flight began, for obs
	queued    time.Duration // how long it waited for the limiter, for obs
}

// observeAttempt tells the observer of the attempt that just ended.
func (c *call) observeAttempt(p *Policy, err error, retry bool) {
	c.outcome = OutcomeSuccess
	if err != nil || retry {
		c.outcome = OutcomeFailure
	}
	if c.obs.Attempt != nil {
		c.obs.Attempt(c.ctx, AttemptInfo{Policy: p.meta.name, Attempt: c.st.Attempt,
			OutageAttempts: c.st.OutageAttempts, Elapsed: time.Since(c.attemptAt), Queued: c.queued, Err: err, Retry: retry})
	}
}

// refused tells the observer that a shared object refused the call's next
// attempt or retry for reason, which ends the call with outcome.
func (c *call) refused(p *Policy, reason error, outcome Outcome) {
	c.outcome = outcome
	if c.obs != nil && c.obs.Refuse != nil {
		c.obs.Refuse(c.ctx, c.info(p), reason)
	}
}

// info identifies the call to its observer.
func (c *call) info(p *Policy) CallInfo { return CallInfo{Policy: p.meta.name} }

// admit starts the next attempt: the before hook, then admission by the
// shared objects. It reports whether the call ends instead, and with what
// error.
func (c *call) admit(p *Policy) (end bool, err error) {
	c.st.Attempt++
	if p.before != nil {
		p.before(c.ctx, State{Attempt: c.st.Attempt, Elapsed: c.since(), Slept: c.st.Slept, PrevWait: c.st.PrevWait, Policy: c.st.Policy})
	}
	refusal := p.shared.admit(c.ctx, &c.ticket)
	c.queued, c.ticket.queued = c.ticket.queued, 0
	if held, reason := c.ticket.takeHeld(); held > 0 && c.obs != nil && c.obs.Hold != nil {
		c.obs.Hold(c.ctx, c.info(p), reason, held)
	}
	if refusal == nil && c.ctx.Err() == nil {
		return false, nil
	}
	c.st.Attempt--
	if c.ctx.Err() != nil { // never start an attempt with a done context
		c.st.Refusal = refusal
		return true, c.ctxEnded(p, nil)
	}
	return true, c.exhausted(p, refusal)
}

// judge decides on an attempt's outcome, v (nil for an error, or in Do)
// and err: a permanent error or an outcome the predicate does not retry
// ends the call. The shared objects hear of it either way.
func (c *call) judge(p *Policy, v any, err error) (end bool, _ error) {
	if err != nil {
		if inner, ok := findPermanent(err); ok {
			p.shared.drop(&c.ticket)
			if c.obs != nil {
				c.observeAttempt(p, err, false)
			}
			return true, inner
		}
	}
	retry := c.retried || (err != nil || p.valueRetry) && p.retry.match(v, err)
	c.retried = false
	c.paced, c.outage = p.shared.report(&c.ticket, attemptOutcome{v: v, err: err, retried: retry, ctxDone: c.ctx.Err() != nil})
	if !retry {
		if c.obs != nil {
			c.observeAttempt(p, err, false)
		}
		return true, err
	}
	if c.outage { // it spends none of the call's attempts
		c.st.Attempt--
		c.st.OutageAttempts++
	}
	if c.obs != nil {
		c.observeAttempt(p, err, retry)
	}
	if v != nil && !isNil(v) {
		c.pending = v
	}
	c.st.Err, c.st.Value = err, v
	return false, nil
}

// pause runs the hooks, the wait and the checks between a retried attempt
// and the next. It reports whether the call ends, and with what error
// (which the exhaustion callback may make nil). Its steps are kept in one
// function, in the order tenacity's semantics give them (after hook, wait,
// stop, deadline, budget, before-sleep hook, sleep, discard), so that the
// order reads top to bottom.
func (c *call) pause(p *Policy) (end bool, err error) {
	st := &c.st
	// Elapsed counts from the end of the first attempt, so a call that
	// succeeds at once never reads the clock. After later attempts the
	// clock is read only when something looks at State.Elapsed.
	if c.start.IsZero() {
		c.start = time.Now()
	} else if p.clockEach {
		st.Elapsed = time.Since(c.start)
	}
	st.Wait = 0
	if p.after != nil {
		p.after(c.ctx, *st)
	}
	if c.ctx.Err() != nil {
		return true, c.ctxEnded(p, nil)
	}
	if !c.waitSet {
		c.w, c.waitSet = p.wait.begin(), true
	}
	d, stop := time.Duration(0), false
	if c.w != nil {
		d, stop = c.w.next(*st)
	}
	if c.paced {
		d = 0 // the shared object paces this retry in admit
	}
	st.Wait = d
	switch {
	case stop || p.stop.check(*st):
		return true, c.exhausted(p, nil)
	case deadlineBefore(c.ctx, d):
		return true, c.ctxEnded(p, context.DeadlineExceeded)
	}
	if refusal := p.shared.allowsRetry(c.outage); refusal != nil {
		return true, c.exhausted(p, refusal)
	}
	if p.beforeSleep != nil {
		p.beforeSleep(c.ctx, *st)
	}
	if c.obs != nil && c.obs.Wait != nil {
		c.obs.Wait(c.ctx, c.info(p), *st)
	}
	if !sleep(c.ctx, d) {
		return true, c.ctxEnded(p, nil)
	}
	st.Slept = addSat(st.Slept, d)
	st.PrevWait = d
	if refusal := p.shared.payRetry(c.outage); refusal != nil {
		return true, c.exhausted(p, refusal)
	}
	if c.pending != nil {
		p.discardValue(c.pending)
		c.pending = nil
	}
	// The context may have ended while the value was released: never
	// start an attempt with a done context.
	if c.ctx.Err() != nil {
		return true, c.ctxEnded(p, nil)
	}
	return false, nil
}

// unwind releases what the call still holds when it ends, by a return or
// a panic.
func (c *call) unwind(p *Policy) {
	p.shared.drop(&c.ticket)
	if c.pending != nil {
		p.discardValue(c.pending)
	}
}

// The ways a call ends after an attempt. Each hands the pending value to
// the caller (it is in the error, or returned) and brings State.Elapsed up
// to date.

// exhausted ends the call with the policy's exhaustion rule: its Stop or
// its Wait gave up, or a shared object refused the retry (refusal).
func (c *call) exhausted(p *Policy, refusal error) error {
	c.settle(p)
	c.st.Refusal = refusal
	c.outcome = OutcomeGaveUp
	if refusal != nil {
		c.refused(p, refusal, refusalOutcome(refusal))
	}
	switch {
	case c.st.Attempt == 0 && c.st.OutageAttempts == 0:
		// refused before any attempt: there is no outcome for the
		// exhaustion rule to return
		return newRetryError(&c.st, nil, nil)
	case p.onExhausted != nil:
		return p.onExhausted(c.st)
	case p.reraise && c.st.Err != nil:
		return c.st.Err
	}
	return newRetryError(&c.st, nil, nil)
}

// ctxEnded ends the call because ctx did. When deadline is non-nil, ctx is
// not done yet, but its deadline would pass during the next wait.
func (c *call) ctxEnded(p *Policy, deadline error) error {
	c.settle(p)
	c.outcome = OutcomeContextDone
	if c.st.Attempt == 0 && c.st.OutageAttempts == 0 && c.st.Refusal == nil {
		return errBeforeStart(c.ctx)
	}
	if deadline != nil {
		return newRetryError(&c.st, deadline, deadline)
	}
	return newRetryError(&c.st, c.ctx.Err(), context.Cause(c.ctx))
}

// settle hands the pending value over and brings st.Elapsed up to date,
// when the loop did not keep it current.
func (c *call) settle(p *Policy) {
	c.pending = nil
	if !p.clockEach && !c.start.IsZero() {
		c.st.Elapsed = time.Since(c.start)
	}
}

// since returns the time since the first attempt ended, or 0 before.
func (c *call) since() time.Duration {
	if c.start.IsZero() {
		return 0
	}
	return time.Since(c.start)
}

// errBeforeStart is the error of a call whose ctx was done before the first
// attempt: ctx.Err() itself, or a *RetryError with no attempt that matches
// both ctx.Err() and a cause set with context.WithCancelCause.
func errBeforeStart(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return newRetryError(&State{}, err, cause)
}

// deadlineBefore reports whether ctx's deadline comes before a wait of d
// would end.
func deadlineBefore(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && d >= time.Until(dl)
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

// box returns v as the value predicates see: nil in Do, which has none.
func box[T any](v T, hasValue bool) any {
	if !hasValue {
		return nil
	}
	return v
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
