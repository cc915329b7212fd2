package retries

import "context"

// Policy says how to retry a function: when to give up, how long to wait,
// which outcomes to retry, what to return on giving up, and which hooks to
// call. Build one with [New] or derive one from another with [Policy.Copy].
//
// A Policy is a small value with no mutable state of its own: assigning it
// copies it, and two copies share only the [Budget], [Limiter] and [Breaker]
// they were given, which are meant to be shared and synchronise themselves. It is
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

	shared shared      // shared by every copy, and with other policies
	meta   *policyMeta // its name and observer, if any

	// Derived from the fields above by Copy, so Do need not ask.
	clockEach  bool // keep State.Elapsed current after every attempt
	valueRetry bool // the predicate may retry a successful outcome
}

// New returns a Policy built from the zero Policy and opts.
func New(opts ...Option) Policy {
	return Policy{}.Copy(opts...)
}

// Copy returns a copy of p with opts applied. It never changes p, so
//
//	retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(n + 1)))
//
// is how a client allows n retries. (A test that wants no real waits runs
// its code under testing/synctest rather than patching a policy: a patch
// does not reach the policies derived from it before.)
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

// Do calls fn until it succeeds, its outcome is not retried, the policy
// gives up, or ctx ends; see [DoValue], whose rules it follows with no
// value.
//
// Do panics if ctx or fn is nil.
//
//go:noinline
func (p Policy) Do(ctx context.Context, fn func(context.Context) error) error {
	// Not inlined: in a caller's package the compiler has no escape
	// information for the generic run, and would move the caller's fn,
	// and what it captures, to the heap (TestRetriesAllocateNothing).
	if fn == nil {
		panic("retries: Policy.Do with a nil function")
	}
	_, err := run[struct{}](ctx, &p, nil, fn)
	return err
}

// DoValue calls fn under p until it succeeds, its outcome is not retried,
// p gives up, or ctx ends, and returns the last value fn returned with:
//   - a nil error, when an attempt succeeded and p does not retry its value;
//   - the attempt's error itself, when p does not retry it;
//   - the inner error, unwrapped, when fn returned [Permanent](err);
//   - what p's exhaustion rule gives, when p gave up after an attempt: its
//     Stop fired, or a shared object refused to go on (its [Budget] the
//     next retry, its fail-fast [Breaker] the next attempt). The rule is
//     the same whoever refused: a [*RetryError] matching the refusal and
//     the last error, the last error ([WithReraise]), or the callback's
//     result ([WithOnExhausted]; [ReturnLastOutcome] returns the last
//     outcome). Under the last two the caller sees no refusal in what
//     comes back: [State.Refusal] tells the callback, and an [Observer]'s
//     Refuse and Done tell an observer;
//   - a [*RetryError] matching [ErrBreakerOpen], when a fail-fast Breaker
//     refused the first attempt: there is no outcome to return;
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
	return run(ctx, &p, fn, nil)
}
