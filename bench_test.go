package retries_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cenkalti/backoff/v4"
	"github.com/seed32e55400/retries"
)

var errTemporary = errors.New("temporary failure")

// op is the operation every benchmark runs: it succeeds on call number
// succeedOn (counting from 1) and fails before that.
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

// BenchmarkFirstTrySuccess compares a call that succeeds at once made
// directly, through backoff v4's Retry, and through Policy.Do.
func BenchmarkFirstTrySuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 1}
			if err := o.call(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backoff_v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 1}
			bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2), ctx)
			if err := backoff.Retry(o.call, bo); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retries", func(b *testing.B) {
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 1}
			if err := p.Do(ctx, func(context.Context) error { return o.call() }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retries_DocV1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 1}
			if err := retries.DocV1.Do(ctx, func(context.Context) error { return o.call() }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFailFailSucceed compares a call that fails twice and then
// succeeds, with zero waits, through backoff v4 and through Policy.Do.
func BenchmarkFailFailSucceed(b *testing.B) {
	ctx := context.Background()
	b.Run("backoff_v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 3}
			bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2), ctx)
			if err := backoff.Retry(o.call, bo); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("retries", func(b *testing.B) {
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 3}
			if err := p.Do(ctx, func(context.Context) error { return o.call() }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
