package retries

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// RetryError reports that a call gave up: its policy stopped after a retried
// outcome (tenacity's RetryError), a shared object refused to go on (its
// [Budget] the next retry, its fail-fast [Breaker] an attempt), or its
// context ended the call. A policy whose exhaustion rule returns something
// else ([WithReraise], [WithOnExhausted]) returns that instead, whoever
// refused, once an attempt was made (see [DoValue]).
//
// It unwraps to the last attempt's error and, when the context ended the
// call, to the context's error and cause as well, and, when a shared
// object refused, to its [ErrBudgetExhausted] or [ErrBreakerOpen], so
// errors.Is and errors.As see all of them. It also records the call's
// statistics.
type RetryError struct {
	// Attempts is the number of attempts made, those that failed during an
	// outage left out.
	Attempts int
	// OutageAttempts is the number of attempts that failed while the
	// policy's [Breaker] was open or half-open.
	OutageAttempts int
	// Elapsed is the time from the end of the first attempt to the end of
	// the call (see State.Elapsed).
	Elapsed time.Duration
	// Slept is the total time spent waiting between attempts.
	Slept time.Duration
	// Err is the last attempt's error, or nil when the last attempt returned
	// a value that was retried.
	Err error
	// Value is the value of the last attempt when that value was retried
	// (a 503 *http.Response, say); nil otherwise, and always nil from
	// Policy.Do. Do has not discarded it: the caller owns it (a
	// [Transport] closes a response's body before returning the error,
	// since a RoundTripper returns a response or an error, not both).
	Value any
	// ContextErr is non-nil when the context ended the call: the
	// context's cause (context.Cause), or context.DeadlineExceeded when the
	// next wait would have ended at or after the context's deadline.
	ContextErr error
	// Refusal is why the policy gave up before its Stop did:
	// [ErrBudgetExhausted] when its Budget refused the next retry,
	// [ErrBreakerOpen] when its Breaker let no attempt through (it fails
	// fast, or the context ended while the call waited for it); nil
	// otherwise.
	Refusal error

	ctxErr error // ctx.Err(), kept when Context is a cause that does not match it
}

// newRetryError records st; ctxErr is the context's error and cause the
// reason the context ended the call, both nil when the policy gave up.
func newRetryError(st *State, ctxErr, cause error) *RetryError {
	e := &RetryError{
		Attempts: st.Attempt, OutageAttempts: st.OutageAttempts, Elapsed: st.Elapsed, Slept: st.Slept,
		Err: st.Err, Value: st.Value, ContextErr: cause, Refusal: st.Refusal,
	}
	if ctxErr != nil && !inTree(cause, ctxErr) {
		e.ctxErr = ctxErr
	}
	return e
}

// Error describes why the call ended and its last outcome, as in
// "retries: giving up after 3 attempts: connection refused" or
// "retries: retry budget exhausted after 1 attempt: EOF".
func (e *RetryError) Error() string {
	var b []byte
	b = append(b, "retries: "...)
	none := e.Attempts == 0 && e.OutageAttempts == 0
	switch {
	case e.ContextErr != nil:
		b = append(b, e.ContextErr.Error()...)
		if none {
			return string(append(b, " before the first attempt"...))
		}
		b = append(b, " after "...)
	case e.Refusal != nil:
		b = append(b, strings.TrimPrefix(e.Refusal.Error(), "retries: ")...)
		if none {
			return string(append(b, " before the first attempt"...))
		}
		b = append(b, " after "...)
	default:
		b = append(b, "giving up after "...)
	}
	b = strconv.AppendInt(b, int64(e.Attempts), 10)
	b = append(b, " attempt"...)
	if e.Attempts != 1 {
		b = append(b, 's')
	}
	if e.OutageAttempts > 0 {
		b = append(b, " and "...)
		b = strconv.AppendInt(b, int64(e.OutageAttempts), 10)
		b = append(b, " during an outage"...)
	}
	last := e
	if inner, _ := asInTree[*RetryError](e.Err); inner != nil &&
		(e.ContextErr != nil && inner.ContextErr == e.ContextErr || e.Refusal != nil && inner.Refusal == e.Refusal) {
		// An inner layer that the same cause stopped says only what its
		// last attempt ended with: the cause, and its counts, once is
		// enough (a feed that stopped said its cause three times).
		last = inner
	}
	switch {
	case last.Err != nil:
		// An inner layer's RetryError says "retries: " once is enough.
		b = append(b, ": "...)
		b = append(b, strings.TrimPrefix(last.Err.Error(), "retries: ")...)
	case last.Value != nil:
		b = append(b, ": last outcome "...)
		b = append(b, describeValue(last.Value)...)
	}
	return string(b)
}

// Unwrap returns the last attempt's error, the context's cause, the
// context's error and the refusal, leaving out those that are nil.
func (e *RetryError) Unwrap() []error {
	errs := make([]error, 0, 4)
	for _, err := range []error{e.Err, e.ContextErr, e.ctxErr, e.Refusal} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Timeout reports whether the call ended in a timeout: the context's
// deadline ended it (its error or cause matches
// [context.DeadlineExceeded]), or the policy gave up after an attempt whose
// error reports a timeout with a Timeout() bool method, as a [net.Error]
// does. A canceled context is not a timeout, whatever the last attempt's
// error says. Through a [net/http.Client], whose [*net/url.Error] asks the
// error it wraps, this makes a [Transport] that gives up on a deadline
// report a timeout as [net/http.Transport] does.
func (e *RetryError) Timeout() bool {
	if e.ContextErr != nil || e.ctxErr != nil {
		return inTree(e.ContextErr, context.DeadlineExceeded) || inTree(e.ctxErr, context.DeadlineExceeded)
	}
	return isTimeout(e.Err)
}
