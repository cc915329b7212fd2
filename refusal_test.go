package retries_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/seed32e55400/retries"
)

// TestRefusalContract: a refusal by any shared object ends the call
// through the policy's exhaustion rule once an attempt has been made: the
// default gives a *RetryError matching the refusal and the last error,
// WithReraise the last error, ReturnLastOutcome the last outcome. A
// refusal before the first attempt has no outcome to return: it is a
// *RetryError matching the refusal, whatever the rule. Before, a fail-fast
// breaker's refusal after an attempt skipped the rule.
func TestRefusalContract(t *testing.T) {
	t.Parallel()
	rules := []struct {
		name string
		opt  retries.Option
	}{
		{"default", retries.WithReraise(false)},
		{"reraise", retries.WithReraise(true)},
		{"last_outcome", retries.WithOnExhausted(retries.ReturnLastOutcome)},
	}
	for _, rule := range rules {
		for _, refuser := range []string{"budget", "breaker"} {
			t.Run(rule.name+"/"+refuser+"/after", func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					var want error
					opts := []retries.Option{retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(1000)), rule.opt}
					switch refuser {
					case "budget":
						opts = append(opts, retries.WithBudget(retries.NewBudget(0, 0)))
						want = retries.ErrBudgetExhausted
					case "breaker":
						b := retries.NewBreaker(retries.BreakerConfig{FailFast: true})
						opts = append(opts, retries.WithBreaker(b))
						want = retries.ErrBreakerOpen
					}
					p := retries.New(opts...)
					calls := 0
					_, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
						calls++
						return nil, errDown
					})
					var re *retries.RetryError
					switch rule.name {
					case "default":
						if !errors.As(err, &re) || !errors.Is(err, want) || !errors.Is(err, errDown) {
							t.Errorf("after %d calls: %v, want a *RetryError matching %v and the last error", calls, err, want)
						}
					default:
						if err != errDown {
							t.Errorf("after %d calls: %v, want the last error itself", calls, err)
						}
					}
				})
			})
		}
		t.Run(rule.name+"/breaker/before", func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := openBreaker(t, retries.BreakerConfig{FailFast: true})
				p := retries.New(retries.WithBreaker(b), rule.opt)
				called := false
				resp, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) { called = true; return nil, nil })
				var re *retries.RetryError
				if called || resp != nil || !errors.As(err, &re) || !errors.Is(err, retries.ErrBreakerOpen) || re.Attempts != 0 {
					t.Errorf("DoValue() = %v, %v (called %v), want a *RetryError matching ErrBreakerOpen with no attempt", resp, err, called)
				}
			})
		})
	}
}
