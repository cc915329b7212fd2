package retries_test

import (
	"context"
	"errors"
	"net/http"
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
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := op{succeedOn: 1}
			if err := o.call(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=backoff_v4", func(b *testing.B) { benchBackoff(b, 1) })
	b.Run("impl=retries", func(b *testing.B) { benchDo(b, retries.New(retries.WithStop(retries.StopAfterAttempt(3))), 1) })
	b.Run("impl=retries_DocV1", func(b *testing.B) { benchDo(b, retries.DocV1, 1) })
}

// benchBackoff runs an op that succeeds on call succeedOn through backoff
// v4's Retry with up to 3 attempts and no wait.
func benchBackoff(b *testing.B, succeedOn int) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		o := op{succeedOn: succeedOn}
		bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2), ctx)
		if err := backoff.Retry(o.call, bo); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDo runs an op that succeeds on call succeedOn through p.Do.
func benchDo(b *testing.B, p retries.Policy, succeedOn int) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		o := op{succeedOn: succeedOn}
		if err := p.Do(ctx, func(context.Context) error { return o.call() }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoValueFirstTrySuccess compares a value-returning call that
// succeeds at once through backoff v4's RetryWithData and through DoValue
// with DocV1, whose predicate reads the value (a status code).
func BenchmarkDoValueFirstTrySuccess(b *testing.B) {
	ctx := context.Background()
	resp := &http.Response{StatusCode: 200}
	get := func() (*http.Response, error) { return resp, nil }
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, err := get(); err != nil || r.StatusCode != 200 {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=backoff_v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2), ctx)
			if r, err := backoff.RetryWithData(get, bo); err != nil || r.StatusCode != 200 {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=retries", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := retries.DoValue(ctx, retries.DocV1, func(context.Context) (*http.Response, error) { return get() })
			if err != nil || r.StatusCode != 200 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFailFailSucceed compares a call that fails twice and then
// succeeds, with zero waits, through backoff v4 and through Policy.Do.
func BenchmarkFailFailSucceed(b *testing.B) {
	b.Run("impl=backoff_v4", func(b *testing.B) { benchBackoff(b, 3) })
	b.Run("impl=retries", func(b *testing.B) { benchDo(b, retries.New(retries.WithStop(retries.StopAfterAttempt(3))), 3) })
}

// BenchmarkDoBreaker compares Policy.Do with and without a closed breaker:
// a first-try success, and fail, fail, succeed.
func BenchmarkDoBreaker(b *testing.B) {
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
	for _, c := range []struct {
		name      string
		succeedOn int
	}{{"first_try", 1}, {"fail_fail_succeed", 3}} {
		b.Run("call="+c.name+"/breaker=none", func(b *testing.B) { benchDo(b, p, c.succeedOn) })
		b.Run("call="+c.name+"/breaker=yes", func(b *testing.B) {
			benchDo(b, p.Copy(retries.WithBreaker(retries.NewBreaker(retries.BreakerConfig{}))), c.succeedOn)
		})
	}
}

// BenchmarkStatusErrors compares a call that fails twice with a
// *StatusError (as CheckStatus returns for a 503) and then succeeds,
// with zero waits, through backoff v4 and through Visit, whose predicate
// looks for a *StatusError in the error's chain.
func BenchmarkStatusErrors(b *testing.B) {
	ctx := context.Background()
	unavailable := &retries.StatusError{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}
	call := func(n *int) error {
		if *n++; *n < 3 {
			return unavailable
		}
		return nil
	}
	b.Run("impl=backoff_v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 2), ctx)
			if err := backoff.Retry(func() error { return call(&n) }, bo); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=retries_Visit", func(b *testing.B) {
		p := retries.Visit.Copy(retries.WithWait(retries.WaitNone()))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := p.Do(ctx, func(context.Context) error { return call(&n) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDoObserver compares a first-try Policy.Do without an observer
// and with one whose functions do nothing: what watching costs a call that
// succeeds at once, beside what it costs to watch none.
func BenchmarkDoObserver(b *testing.B) {
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
	noop := &retries.Observer{
		Start:   func(ctx context.Context, _ retries.CallInfo) context.Context { return ctx },
		Attempt: func(context.Context, retries.AttemptInfo) {},
		Done:    func(context.Context, retries.CallDone) {},
	}
	b.Run("observer=none", func(b *testing.B) { benchDo(b, p, 1) })
	b.Run("observer=noop", func(b *testing.B) { benchDo(b, p.Copy(retries.WithObserver(noop)), 1) })
}
