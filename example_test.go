package retries_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/seed32e55400/retries"
)

// This example retries a call that fails twice and then succeeds. The copy
// of ControlPlane removes its waits so that the example runs at once.
func ExamplePolicy_Do() {
	p := retries.ControlPlane.Copy(retries.WithWait(retries.WaitNone()))

	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("temporary failure")
		}
		return nil
	})
	fmt.Println(attempts, err)
	// Output: 3 <nil>
}

// This example shows what a policy that gives up with a RetryError returns:
// the error wraps the last attempt's error and records the attempts.
func ExamplePolicy_Do_retryError() {
	errUnavailable := errors.New("unavailable")
	p := retries.Query.Copy(retries.WithWait(retries.WaitNone()))

	err := p.Do(context.Background(), func(context.Context) error { return errUnavailable })

	var re *retries.RetryError
	fmt.Println(errors.As(err, &re), re.Attempts, errors.Is(err, errUnavailable))
	fmt.Println(err)
	// Output:
	// true 5 true
	// retries: giving up after 5 attempts: unavailable
}

// This example retries a function that returns a value: SyncRequest retries
// a 429 response and, once it gives up, returns the last response with a nil
// error, as pyvespa does.
func ExampleDoValue() {
	p := retries.SyncRequest.Copy(
		retries.WithStop(retries.StopAfterAttempt(3)),
		retries.WithWait(retries.WaitNone()),
	)

	calls := 0
	resp, err := retries.DoValue(context.Background(), p, func(context.Context) (*http.Response, error) {
		calls++
		return &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody}, nil
	})
	fmt.Println(calls, resp.StatusCode, err)
	// Output: 3 429 <nil>
}

// This example derives a policy from a package variable. The original is
// unchanged.
func ExamplePolicy_Copy() {
	numRetries429 := 4
	p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(numRetries429 + 1)))

	fmt.Println(p.Stop())
	fmt.Println(retries.SyncRequest.Stop())
	// Output:
	// StopAfterAttempt(5)
	// StopAfterAttempt(11)
}

// Printing a policy tells exactly what it does.
func ExamplePolicy_String() {
	fmt.Println(retries.DocV1)
	fmt.Println(retries.Throttle)
	// Output:
	// Policy{name: "DocV1", stop: StopAfterAttempt(3), wait: WaitExponential(multiplier=1s, base=2, min=0s, max=none), retry: RetryAny(RetryIfAnyError(), RetryIfStatus(503)), on exhaustion: retries.ReturnLastOutcome}
	// Policy{name: "Throttle", stop: StopNever(), wait: WaitRandomExponential(multiplier=1s, base=2, min=0s, max=10s), retry: RetryIfStatus(429), on exhaustion: RetryError}
}

// This example layers the two document/v1 policies as pyvespa does: DocV1
// outside, retrying errors and 503 responses up to 3 attempts, around
// Throttle, which retries 429 responses for as long as they come. A 429 never
// spends an outer attempt, and each outer attempt starts the inner schedule
// afresh. The waits are removed so that the example runs at once.
func Example_docV1AroundThrottle() {
	outer := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()))
	inner := retries.Throttle.Copy(retries.WithWait(retries.WaitNone()))

	statuses := []int{429, 503, 429, 429, 200}
	requests := 0
	send := func(context.Context) (*http.Response, error) { // one HTTP request
		code := statuses[requests]
		requests++
		return &http.Response{StatusCode: code, Body: http.NoBody}, nil
	}

	resp, err := retries.DoValue(context.Background(), outer, func(ctx context.Context) (*http.Response, error) {
		return retries.DoValue(ctx, inner, send)
	})
	fmt.Println(resp.StatusCode, err, requests)
	// Output: 200 <nil> 5
}

// This example shows the bounds of Throttle's randomised wait: the cap
// doubles from 1 s and stays at 10 s, however long the backpressure lasts.
func ExampleWait_Bounds() {
	for _, n := range []int{1, 2, 3, 4, 5, 64, 1000000} {
		lo, hi := retries.Throttle.Wait().Bounds(retries.State{Attempt: n})
		fmt.Printf("after attempt %d: %v to %v\n", n, lo, hi)
	}
	// Output:
	// after attempt 1: 0s to 1s
	// after attempt 2: 0s to 2s
	// after attempt 3: 0s to 4s
	// after attempt 4: 0s to 8s
	// after attempt 5: 0s to 10s
	// after attempt 64: 0s to 10s
	// after attempt 1000000: 0s to 10s
}

// This example gives up before a deadline instead of sleeping past it: the
// second wait, an hour, would end after the one-minute timeout, so Do
// returns at once with an error that matches both context.DeadlineExceeded
// and the last attempt's error.
func ExamplePolicy_Do_deadline() {
	errDown := errors.New("down")
	p := retries.New(
		retries.WithStop(retries.StopAfterAttempt(5)),
		retries.WithWait(retries.WaitChain(retries.WaitFixed(time.Millisecond), retries.WaitFixed(time.Hour))),
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	attempts := 0
	err := p.Do(ctx, func(context.Context) error { attempts++; return errDown })
	fmt.Println(attempts, errors.Is(err, context.DeadlineExceeded), errors.Is(err, errDown))
	// Output: 2 true true
}

// A Breaker that fails fast ends calls at once while the server is down;
// without FailFast they would wait for it to come back.
func ExampleWithBreaker() {
	b := retries.NewBreaker(retries.BreakerConfig{FailFast: true})
	p := retries.New(retries.WithBreaker(b))
	down := errors.New("connection refused")
	for b.State() != retries.BreakerOpen {
		_ = p.Do(context.Background(), func(context.Context) error { return down })
	}
	err := p.Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println(b.State())
	fmt.Println(err)
	fmt.Println(errors.Is(err, retries.ErrBreakerOpen))
	// Output:
	// open
	// retries: circuit breaker open before the first attempt
	// true
}

// ExampleRetryIfOutage: the inner layer retries a 503 only while its
// breaker is open, so that an outer DocV1 layer spends no attempt on an
// outage, and otherwise returns the 503 for the outer layer to judge.
func ExampleRetryIfOutage() {
	b := retries.NewBreaker(retries.BreakerConfig{})
	pred := retries.RetryIfOutage(b, retries.DocV1.Retry())
	unavailable := &retries.StatusError{StatusCode: 503}
	fmt.Println(pred)
	fmt.Println("closed:", pred.Match(nil, unavailable))
	p := retries.New(retries.WithBreaker(b))
	for b.State() != retries.BreakerOpen {
		_ = p.Do(context.Background(), func(context.Context) error { return unavailable })
	}
	fmt.Println("open:", pred.Match(nil, unavailable))
	// Output:
	// RetryIfOutage(RetryAny(RetryIfAnyError(), RetryIfStatus(503)))
	// closed: false
	// open: true
}

// An Observer sees every call of a policy: here it prints each retry's wait
// and how the call ended. The otel module turns the same events into
// OpenTelemetry metrics and spans.
func ExampleWithObserver() {
	obs := &retries.Observer{
		Wait: func(_ context.Context, _ retries.CallInfo, s retries.State) {
			fmt.Printf("attempt %d failed (%v); retrying in %v\n", s.Attempt, s.Err, s.Wait)
		},
		Done: func(_ context.Context, d retries.CallDone) {
			fmt.Printf("%s: %s after %d attempts\n", d.Policy, d.Outcome, d.Attempts)
		},
	}
	p := retries.ControlPlane.Copy(retries.WithWait(retries.WaitNone()), retries.WithObserver(obs))
	n := 0
	_ = p.Do(context.Background(), func(context.Context) error {
		if n++; n < 3 {
			return errors.New("unavailable")
		}
		return nil
	})
	// Output:
	// attempt 1 failed (unavailable); retrying in 0s
	// attempt 2 failed (unavailable); retrying in 0s
	// ControlPlane: success after 3 attempts
}
