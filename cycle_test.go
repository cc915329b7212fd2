package retries_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// TestCyclicErrorEnds hands every policy, layered or not, an error whose
// tree never ends, and asks of what Do returns everything that the package
// answers by looking inside an error: its message (the message once hung
// on errors.As), Timeout, IsConnectionError and the package's predicates.
// Each must end. A hang fails after a minute rather than at go test's
// timeout, so that the failing case is named.
func TestCyclicErrorEnds(t *testing.T) {
	t.Parallel()
	a := &cycle{}
	a.next = &cycle{next: a}
	quick := []retries.Option{retries.WithStop(retries.StopAfterAttempt(2)), retries.WithWait(retries.WaitNone())}
	policies := map[string]retries.Policy{"zero": {}}
	for _, p := range []retries.Policy{retries.Query, retries.DocV1, retries.Throttle, retries.SyncRequest,
		retries.Visit, retries.ControlPlane, retries.URLValidation} {
		policies[p.Name()] = p.Copy(quick...)
	}
	policies["RetryIfErrorIs"] = retries.New(append(quick, retries.WithRetry(retries.RetryIfErrorIs(io.EOF)))...)
	policies["RetryIfStatus"] = retries.New(append(quick, retries.WithRetry(retries.RetryIfStatus(503)))...)
	policies["IsConnectionError"] = retries.New(append(quick,
		retries.WithRetry(retries.RetryIfError(retries.IsConnectionError)))...)
	for _, cyclic := range []error{&selfWrapper{}, a} {
		for name, p := range policies {
			outer := retries.DocV1.Copy(quick...)
			calls := map[string]func(context.Context) error{
				"alone": func(ctx context.Context) error {
					return p.Do(ctx, func(context.Context) error { return cyclic })
				},
				"inside DocV1": func(ctx context.Context) error {
					return outer.Do(ctx, func(ctx context.Context) error {
						return p.Do(ctx, func(context.Context) error { return cyclic })
					})
				},
				"canceled during the call": func(ctx context.Context) error {
					ctx, cancel := context.WithCancelCause(ctx)
					return outer.Do(ctx, func(ctx context.Context) error {
						return p.Do(ctx, func(context.Context) error {
							cancel(fmt.Errorf("stop: %w", cyclic))
							return cyclic
						})
					})
				},
				"through a Transport": func(ctx context.Context) error {
					c := &http.Client{Transport: retries.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
						return nil, cyclic
					}), p)}
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
					_, err := c.Do(req)
					return err
				},
			}
			for how, call := range calls {
				done := make(chan string, 1)
				go func() {
					err := call(t.Context())
					// Only the first level is asked: errors.As itself would
					// spin on the cyclic error that Throttle returns as it is.
					var parts []any
					if timeout, ok := err.(interface{ Timeout() bool }); ok {
						parts = append(parts, timeout.Timeout())
					}
					parts = append(parts, retries.IsConnectionError(err))
					done <- fmt.Sprintf("%v %v", err, parts)
				}()
				select {
				case s := <-done:
					if s == "" {
						t.Errorf("%s, %s: empty", name, how)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%T: %s, %s: still looking inside the error after a minute", cyclic, name, how)
				}
			}
		}
	}
}
