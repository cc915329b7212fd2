package retries_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/seed32e55400/retries"
)

func TestRetryErrorMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *retries.RetryError
		want string
	}{
		{&retries.RetryError{Attempts: 3, Err: errBoom}, "retries: giving up after 3 attempts: boom"},
		{&retries.RetryError{Attempts: 1, Err: errBoom}, "retries: giving up after 1 attempt: boom"},
		{&retries.RetryError{Attempts: 2, Value: &http.Response{StatusCode: 503}},
			"retries: giving up after 2 attempts: last outcome *http.Response with status 503"},
		{&retries.RetryError{Attempts: 2, Err: errBoom, ContextErr: context.DeadlineExceeded},
			"retries: context deadline exceeded after 2 attempts: boom"},
		{&retries.RetryError{ContextErr: context.Canceled}, "retries: context canceled before the first attempt"},
		{&retries.RetryError{Attempts: 1, Err: errBoom, Refusal: retries.ErrBudgetExhausted},
			"retries: retry budget exhausted after 1 attempt: boom"},
		{&retries.RetryError{Attempts: 4}, "retries: giving up after 4 attempts"},
		{&retries.RetryError{Attempts: 5, Err: &retries.RetryError{Attempts: 10, Err: errBoom}},
			"retries: giving up after 5 attempts: giving up after 10 attempts: boom"},
		// The inner layer that the same cause stopped adds only its last
		// attempt's error: "interrupted after 2 attempts: interrupted before
		// the first attempt" said the cause twice, and a feed stopped for
		// its setup said "no request got a response in 30s (dial …):
		// check -url after 2 attempts: no request got a response in 30s
		// (dial …): check -url after 0 attempts and 15 during an outage:
		// dial …", its cause three times.
		{&retries.RetryError{Attempts: 2, ContextErr: errBoom, Err: &retries.RetryError{ContextErr: errBoom}},
			"retries: boom after 2 attempts"},
		{&retries.RetryError{Attempts: 2, ContextErr: errBoom, Err: &retries.RetryError{Attempts: 1, ContextErr: errBoom, Err: errDown}},
			"retries: boom after 2 attempts: connection refused (the server is down)"},
		{&retries.RetryError{Attempts: 1, Refusal: errBoom, Err: &retries.RetryError{Attempts: 3, OutageAttempts: 4, Refusal: errBoom, Value: &http.Response{StatusCode: 503}}},
			"retries: boom after 1 attempt: last outcome *http.Response with status 503"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestRetryErrorUnwrap(t *testing.T) {
	t.Parallel()
	e := &retries.RetryError{Attempts: 1, Err: errBoom, ContextErr: context.Canceled, Refusal: retries.ErrBudgetExhausted}
	if got := e.Unwrap(); !slices.Equal(got, []error{errBoom, context.Canceled, retries.ErrBudgetExhausted}) {
		t.Errorf("Unwrap() = %v", got)
	}
	if got := (&retries.RetryError{Attempts: 2}).Unwrap(); len(got) != 0 {
		t.Errorf("Unwrap() of a value outcome = %v, want nothing", got)
	}
	for _, target := range []error{errBoom, context.Canceled, retries.ErrBudgetExhausted} {
		if !errors.Is(e, target) {
			t.Errorf("errors.Is(%v, %v) = false", e, target)
		}
	}
}

// TestRetryErrorKeepsCauseAndContextError ends a call with a cause that is
// not the context's error: both match.
func TestRetryErrorKeepsCauseAndContextError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("shutting down")
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
	err := p.Do(ctx, func(context.Context) error { cancel(cause); return errBoom })
	for _, target := range []error{errBoom, cause, context.Canceled} {
		if !errors.Is(err, target) {
			t.Errorf("Do() = %v, want it to match %v", err, target)
		}
	}
}
