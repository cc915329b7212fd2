package retries

import (
	"context"
	"strconv"
	"time"
)

// Observer is a set of functions that a [Policy] calls as its calls run, to
// watch them: for metrics, traces or logs. Attach one with [WithObserver].
// Any field may be nil. The functions run on the calling goroutine, in the
// call's order, and must not block: the call waits for them. They must not
// retain the events' values past their return.
//
// A policy without an observer pays nothing for this: its calls check one
// pointer.
type Observer struct {
	// Start is called when a call starts, before its first attempt, with
	// the call's context; the context it returns is the one every attempt,
	// hook and later event of the call receives (a span's, say). A nil
	// Start leaves the context as it is.
	Start func(ctx context.Context, call CallInfo) context.Context
	// Attempt is called when an attempt has ended and been judged.
	Attempt func(ctx context.Context, a AttemptInfo)
	// Wait is called when the call begins to wait before a retry, with the
	// call's State; State.Wait is the wait, which may be 0.
	Wait func(ctx context.Context, call CallInfo, s State)
	// Refuse is called when a shared object refuses the call's next
	// attempt or retry: reason is [ErrBudgetExhausted] or [ErrBreakerOpen].
	Refuse func(ctx context.Context, call CallInfo, reason error)
	// Hold is called when a shared object has held the call's next attempt
	// back for d, and lets it go (or the context ended): reason is
	// [ErrBreakerOpen] for a breaker that waits out an outage.
	Hold func(ctx context.Context, call CallInfo, reason error, d time.Duration)
	// Done is called when the call ends, however it ends, except by a
	// panic.
	Done func(ctx context.Context, d CallDone)
}

// CallInfo identifies a call to the events that carry nothing else.
type CallInfo struct {
	// Policy is the policy's name ([WithName]); "" if it has none.
	Policy string
}

// AttemptInfo describes an attempt that has ended.
type AttemptInfo struct {
	// Policy is the policy's name.
	Policy string
	// Attempt is the attempt's number, from 1, as in [State]. An attempt
	// that failed during an outage is counted by OutageAttempts instead.
	Attempt, OutageAttempts int
	// Elapsed is how long the attempt ran: the function called, not the
	// waits before it.
	Elapsed time.Duration
	// Queued is how long the attempt waited for a permit of the policy's
	// [Limiter] before it began (0 without one, or on the limiter's fast
	// path). A wait the limiter imposes (its rate, a Retry-After it holds
	// every attempt for) is here, not in [State.Wait].
	Queued time.Duration
	// Err is the attempt's error, nil if it returned a value.
	Err error
	// Retry reports whether the policy's predicate retries the outcome. A
	// retry may still not happen: the stop, the deadline or a shared object
	// can end the call first.
	Retry bool
}

// CallDone describes a call that has ended.
type CallDone struct {
	// Policy is the policy's name.
	Policy string
	// Outcome says how the call ended.
	Outcome Outcome
	// Attempts counts the attempts made, those that failed during an
	// outage left out, as [RetryError.Attempts] does.
	Attempts int
	// OutageAttempts counts the attempts that failed while the policy's
	// [Breaker] was open or half-open, as [RetryError.OutageAttempts] does.
	OutageAttempts int
	// Elapsed is the time from the start of the call to its end.
	Elapsed time.Duration
	// Value is the value the call returns (DoValue's, even beside an
	// error; nil for Do): an *http.Response through a [Transport], whose
	// status tells a success from an answer the policy gave up on or does
	// not retry, which end a call without an error too.
	Value any
	// Err is the error the call returns.
	Err error
}

// Outcome is how a call ended, a small set of values fit to be a metric's
// attribute.
type Outcome uint8

// The outcomes of a call.
const (
	// OutcomeSuccess: an attempt succeeded, and its value was not retried.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: an attempt failed with an error the policy does not
	// retry, or a [Permanent] one.
	OutcomeFailure
	// OutcomeGaveUp: the policy's Stop or Wait gave up.
	OutcomeGaveUp
	// OutcomeBudgetRefused: the policy's [Budget] refused the next retry.
	OutcomeBudgetRefused
	// OutcomeBreakerOpen: the policy's [Breaker] refused an attempt.
	OutcomeBreakerOpen
	// OutcomeContextDone: the call's context ended first, or its deadline
	// would have passed during the next wait.
	OutcomeContextDone
)

// String returns the outcome's name: "success", "failure", "gave_up",
// "budget_refused", "breaker_open" or "context_done".
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeFailure:
		return "failure"
	case OutcomeGaveUp:
		return "gave_up"
	case OutcomeBudgetRefused:
		return "budget_refused"
	case OutcomeBreakerOpen:
		return "breaker_open"
	case OutcomeContextDone:
		return "context_done"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// WithObserver attaches o to the policy; nil removes it. Copies of the
// policy share o. None of the seven policies has one.
func WithObserver(o *Observer) Option {
	return func(p *Policy) { p.meta = p.meta.with(func(m *policyMeta) { m.obs = o }) }
}

// WithName names the policy, for observers: [CallInfo.Policy]. Keep names
// few and fixed, as a metric's attribute needs. The seven policies are
// named after themselves ("Query", "DocV1", …); a copy keeps its name,
// even one whose options change what it does, since most copies are
// the same call site tuned (package feed's layers are copies of DocV1 and
// Throttle, and its dashboards group by those names). Name a copy that is
// another call site anew, or its metrics add up with its parent's.
func WithName(name string) Option {
	return func(p *Policy) { p.meta = p.meta.with(func(m *policyMeta) { m.name = name }) }
}

// Name returns the policy's name ([WithName]), or "".
func (p Policy) Name() string {
	if p.meta == nil {
		return ""
	}
	return p.meta.name
}

// policyMeta holds what a Policy carries for observers, behind one pointer
// so that a Policy stays small. It is never modified once built.
type policyMeta struct {
	name string
	obs  *Observer
}

// with returns a copy of m changed by f.
func (m *policyMeta) with(f func(*policyMeta)) *policyMeta {
	var c policyMeta
	if m != nil {
		c = *m
	}
	f(&c)
	return &c
}

// observer returns the policy's observer, or nil.
func (p *Policy) observer() *Observer {
	if p.meta == nil {
		return nil
	}
	return p.meta.obs
}
