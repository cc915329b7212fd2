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
