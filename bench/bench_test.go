package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	retrygo "github.com/avast/retry-go/v4"
	retrygov5 "github.com/avast/retry-go/v5"
	backoffv4 "github.com/cenkalti/backoff/v4"
	backoffv5 "github.com/cenkalti/backoff/v5"
	backoffv7 "github.com/cenkalti/backoff/v7"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/seed32e55400/retries"
	goretry "github.com/sethvargo/go-retry"
)

var errTemporary = errors.New("temporary failure")

// op is the operation every benchmark runs: it fails until call number
// succeedOn (counting from 1) and succeeds from then on.
type op struct {
	calls, succeedOn int
}

//go:noinline
func (o *op) call() error {
	o.calls++
	if o.calls < o.succeedOn {
		return errTemporary
	}
	return nil
}

// checkCalls fails the benchmark when the library did not call the
// operation exactly want times, which would mean it is misconfigured.
func checkCalls(b *testing.B, o *op, err error, want int) {
	if err != nil {
		b.Fatalf("call error = %v, want nil", err)
	}
	if o.calls != want {
		b.Fatalf("operation called %d times, want %d", o.calls, want)
	}
}

// BenchmarkFirstTrySuccess runs an operation that succeeds at once, with
// each library allowed 3 attempts and no wait.
func BenchmarkFirstTrySuccess(b *testing.B) { benchAll(b, 1) }

// BenchmarkFailFailSucceed runs an operation that fails twice and then
// succeeds, with each library allowed 3 attempts and no wait.
func BenchmarkFailFailSucceed(b *testing.B) { benchAll(b, 3) }

// benchAll runs, for each library, an operation that succeeds on call
// succeedOn. Whatever a library lets us build once and reuse (a policy, an
// option list, an executor) is built outside the loop; whatever carries
// per-call state (a BackOff, a go-retry Backoff) is built per call, as the
// library requires. retry-go v5 takes the context when its Retrier is
// built, so it runs both ways: one Retrier reused with one fixed context,
// and a Retrier built per call, as a caller with a context per call must.
func benchAll(b *testing.B, succeedOn int) {
	ctx := context.Background()

	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			var err error
			for range 3 {
				if err = o.call(); err == nil {
					break
				}
			}
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=retries", func(b *testing.B) {
		// StopAfterAttempt counts attempts; the zero Wait is no wait.
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := p.Do(ctx, func(context.Context) error { return o.call() })
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=backoff_v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			// WithMaxRetries counts retries: 2 retries are 3 attempts.
			bo := backoffv4.WithContext(backoffv4.WithMaxRetries(&backoffv4.ZeroBackOff{}, 2), ctx)
			err := backoffv4.Retry(o.call, bo)
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=backoff_v5", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			// WithMaxTries counts attempts.
			_, err := backoffv5.Retry(ctx, func() (struct{}, error) { return struct{}{}, o.call() },
				backoffv5.WithBackOff(&backoffv5.ZeroBackOff{}), backoffv5.WithMaxTries(3))
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=backoff_v7", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			// WithMaxTries counts attempts.
			_, err := backoffv7.Retry(ctx, func() (struct{}, error) { return struct{}{}, o.call() },
				backoffv7.WithBackOff(&backoffv7.ZeroBackOff{}), backoffv7.WithMaxTries(3))
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=retry_go_v4", func(b *testing.B) {
		// Attempts counts attempts; FixedDelay with Delay(0) is no wait and
		// no jitter (the default delay type adds a random jitter).
		opts := []retrygo.Option{
			retrygo.Attempts(3), retrygo.Delay(0), retrygo.MaxJitter(0),
			retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx),
		}
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := retrygo.Do(o.call, opts...)
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=retry_go_v5_reused", func(b *testing.B) {
		// The same options as v4; the Retrier, with its context, is built
		// once and reused.
		r := retrygov5.New(
			retrygov5.Attempts(3), retrygov5.Delay(0), retrygov5.MaxJitter(0),
			retrygov5.DelayType(retrygov5.FixedDelay), retrygov5.Context(ctx),
		)
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := r.Do(o.call)
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=retry_go_v5_per_call", func(b *testing.B) {
		// A Retrier per call, as a caller whose context changes from call
		// to call has to build it.
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := retrygov5.New(
				retrygov5.Attempts(3), retrygov5.Delay(0), retrygov5.MaxJitter(0),
				retrygov5.DelayType(retrygov5.FixedDelay), retrygov5.Context(ctx),
			).Do(o.call)
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=go_retry", func(b *testing.B) {
		// go-retry's NewConstant refuses a zero wait, so the zero wait is a
		// BackoffFunc; WithMaxRetries counts retries. go-retry retries only
		// errors marked with RetryableError.
		zero := goretry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := goretry.Do(ctx, goretry.WithMaxRetries(2, zero), func(context.Context) error {
				if err := o.call(); err != nil {
					return goretry.RetryableError(err)
				}
				return nil
			})
			checkCalls(b, &o, err, succeedOn)
		}
	})

	b.Run("impl=failsafe", func(b *testing.B) {
		// WithMaxAttempts counts attempts; a retry policy has no delay
		// unless one is set.
		rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(3).Build()
		ex := failsafe.With(rp).WithContext(ctx)
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: succeedOn}
			err := ex.Run(o.call)
			checkCalls(b, &o, err, succeedOn)
		}
	})
}

// TestBenchConfigsGiveUpAfterThree checks the other half of each
// benchmark's configuration: with an operation that never succeeds, every
// library stops after exactly 3 calls.
func TestBenchConfigsGiveUpAfterThree(t *testing.T) {
	ctx := context.Background()
	zero := goretry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
	for _, tc := range []struct {
		impl string
		run  func(o *op) error
	}{
		{"retries", func(o *op) error {
			return retries.New(retries.WithStop(retries.StopAfterAttempt(3))).Do(ctx, func(context.Context) error { return o.call() })
		}},
		{"backoff_v4", func(o *op) error {
			return backoffv4.Retry(o.call, backoffv4.WithContext(backoffv4.WithMaxRetries(&backoffv4.ZeroBackOff{}, 2), ctx))
		}},
		{"backoff_v5", func(o *op) error {
			_, err := backoffv5.Retry(ctx, func() (struct{}, error) { return struct{}{}, o.call() },
				backoffv5.WithBackOff(&backoffv5.ZeroBackOff{}), backoffv5.WithMaxTries(3))
			return err
		}},
		{"backoff_v7", func(o *op) error {
			_, err := backoffv7.Retry(ctx, func() (struct{}, error) { return struct{}{}, o.call() },
				backoffv7.WithBackOff(&backoffv7.ZeroBackOff{}), backoffv7.WithMaxTries(3))
			return err
		}},
		{"retry_go_v4", func(o *op) error {
			return retrygo.Do(o.call, retrygo.Attempts(3), retrygo.Delay(0), retrygo.MaxJitter(0),
				retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx))
		}},
		{"retry_go_v5", func(o *op) error {
			return retrygov5.New(retrygov5.Attempts(3), retrygov5.Delay(0), retrygov5.MaxJitter(0),
				retrygov5.DelayType(retrygov5.FixedDelay), retrygov5.Context(ctx)).Do(o.call)
		}},
		{"go_retry", func(o *op) error {
			return goretry.Do(ctx, goretry.WithMaxRetries(2, zero), func(context.Context) error {
				if err := o.call(); err != nil {
					return goretry.RetryableError(err)
				}
				return nil
			})
		}},
		{"failsafe", func(o *op) error {
			return failsafe.With(retrypolicy.NewBuilder[any]().WithMaxAttempts(3).Build()).WithContext(ctx).Run(o.call)
		}},
	} {
		t.Run("impl="+tc.impl, func(t *testing.T) {
			o := op{succeedOn: 1 << 30}
			err := tc.run(&o)
			if !errors.Is(err, errTemporary) {
				t.Errorf("error = %v, want one matching %v", err, errTemporary)
			}
			if o.calls != 3 {
				t.Errorf("operation called %d times, want 3", o.calls)
			}
		})
	}
}
