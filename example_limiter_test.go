package retries_test

import (
	"context"
	"fmt"

	"github.com/seed32e55400/retries"
)

// This example shares a Limiter between the calls of a Throttle policy. A
// 429 tells the limiter to slow down, and the retry after it waits for the
// limiter's pacing instead of Throttle's random wait of up to a second.
func ExampleLimiter() {
	l := retries.NewLimiter(retries.LimiterConfig{MinRate: 1000}) // at least 1000 attempts a second
	p := retries.Throttle.Copy(retries.WithLimiter(l))

	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempts++
		if attempts < 3 {
			return &retries.StatusError{StatusCode: 429}
		}
		return nil
	})
	s := l.Stats()
	fmt.Println(attempts, err)
	fmt.Println(s.Successes, s.Throttles, s.InFlight, s.Rate > 0)
	// Output:
	// 3 <nil>
	// 1 2 0 true
}

// This example hands permits to calls, as a dispatcher does: it waits for
// the limiter itself, then starts each call with its permit. The call's
// first attempt takes the permit handed to it, so it does not wait for
// another (with one permit at most in flight, it would wait for ever).
func ExampleHandPermit() {
	l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
	p := retries.Throttle.Copy(retries.WithLimiter(l))

	for i := range 2 {
		permit, err := l.Acquire(context.Background()) // the dispatcher waits here
		if err != nil {
			return
		}
		ctx, done := retries.HandPermit(context.Background(), permit)
		err = p.Do(ctx, func(context.Context) error {
			fmt.Println("call", i, "in flight:", l.Stats().InFlight)
			return nil
		})
		done() // releases the permit if no attempt took it
		fmt.Println("call", i, err, "in flight:", l.Stats().InFlight)
	}
	// Output:
	// call 0 in flight: 1
	// call 0 <nil> in flight: 0
	// call 1 in flight: 1
	// call 1 <nil> in flight: 0
}
