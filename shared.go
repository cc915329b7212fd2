package retries

import "context"

// shared holds the objects that a policy and its copies share with every
// other call that uses them: a [Budget] and a [Limiter]. Each owns its
// synchronisation. This is the one place the call loop consults them, at
// five points of a call:
//
//   - start: a call begins (the budget earns a deposit);
//   - admit: an attempt is about to start (the limiter paces it);
//   - report: the attempt ended, and the predicate judged it (the limiter
//     learns from its outcome);
//   - mayRetry: a retry is decided, before its wait (the budget may refuse);
//   - retry: the wait is over and the retry starts (the budget pays for it).
//
// A new shared object adds its field and its lines here, and nothing in
// the loop.
type shared struct {
	budget  *Budget
	limiter *Limiter
}

// ticket is what the shared objects lend one attempt, to be handed back
// with its outcome: a limiter's permit.
type ticket struct {
	permit Permit
}

// start is called once per call, before its first attempt.
func (s *shared) start() {
	if s.budget != nil {
		s.budget.deposit()
	}
}

// admits reports whether attempts must be admitted, and so may hold a
// ticket that a panic must not leak.
func (s *shared) admits() bool { return s.limiter != nil }

// admit waits until an attempt may start, and sets its ticket in t; the
// error is ctx's when ctx ends first.
func (s *shared) admit(ctx context.Context, t *ticket) (err error) {
	if s.limiter != nil {
		t.permit, err = s.limiter.Acquire(ctx)
	}
	return err
}

// report hands back t with the outcome of its attempt: the value (nil for
// an error, or in Do), the error, and whether the predicate retried it. It
// reports whether the next attempt is paced by a shared object, so that
// the call need not wait on its own.
func (s *shared) report(t *ticket, v any, err error, retried bool) (paced bool) {
	if t.permit.l == nil {
		return false
	}
	return s.reportPermit(t, v, err, retried)
}

func (s *shared) reportPermit(t *ticket, v any, err error, retried bool) (paced bool) {
	sig := SignalSuccess
	switch {
	case retried && s.limiter.backpressure(v, err):
		sig, paced = SignalBackpressure, true
	case retried:
		sig = SignalFailure
	case err != nil:
		sig = SignalIgnore
	case v != nil:
		sig = successSignal(v)
	}
	t.permit.Release(sig)
	t.permit = Permit{}
	return paced
}

// drop hands back t with no outcome to learn from: the attempt's error was
// permanent, or a panic unwinds the call.
func (s *shared) drop(t *ticket) {
	if t.permit.l != nil {
		t.permit.Release(SignalIgnore)
		t.permit = Permit{}
	}
}

// mayRetry returns why a retry that has been decided may not happen
// ([ErrBudgetExhausted]), or nil.
func (s *shared) mayRetry() error {
	if s.budget != nil && !s.budget.allows() {
		return ErrBudgetExhausted
	}
	return nil
}

// retry pays for a retry once its wait is over, or returns why it may not
// happen after all.
func (s *shared) retry() error {
	if s.budget != nil && !s.budget.withdraw() {
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
