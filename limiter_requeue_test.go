package retries_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestLimiterRequeuesBackpressure: an attempt answered 429 frees no place
// at the server, so its release hands nothing to the calls waiting; its
// retry waits at the front of the queue and takes the place that the next
// release frees, ahead of a call that waited longer.
func TestLimiterRequeuesBackpressure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		// The limiter starts at 4 in flight: hold 3, the call takes the 4th.
		var held []retries.Permit
		for range 3 {
			p, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		var mu sync.Mutex
		var order []string
		record := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		granted := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(order)
		}
		var wg sync.WaitGroup
		attempts := 0
		inFlight, answer := make(chan struct{}), make(chan struct{})
		p := retries.Throttle.Copy(retries.WithLimiter(l))
		wg.Go(func() {
			err := p.Do(context.Background(), func(context.Context) error {
				attempts++
				if attempts == 1 {
					close(inFlight)
					<-answer
					return &retries.StatusError{StatusCode: 429}
				}
				record("retry")
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		<-inFlight
		// A call arrives while the first attempt is in flight, and waits.
		wg.Go(func() {
			q, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			record("waiter")
			q.Release(retries.SignalSuccess)
		})
		synctest.Wait()
		close(answer)
		synctest.Wait()
		if g, s := granted(), l.Stats(); len(g) != 0 || s.Waiting != 2 {
			t.Fatalf("after the 429: %v granted, Stats() = %+v; want none granted and 2 waiting (the retry and the waiter)", g, s)
		}
		// One attempt ends: the place it frees goes to the retry first, once
		// the rate limit that the 429 turned on gives a token.
		held[0].Release(retries.SignalSuccess)
		time.Sleep(1500 * time.Millisecond)
		if g := granted(); len(g) == 0 || g[0] != "retry" {
			t.Errorf("after one release: %v granted; want the retry first", g)
		}
		for _, h := range held[1:] {
			h.Release(retries.SignalSuccess)
		}
		wg.Wait()
		if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 || attempts != 2 {
			t.Errorf("in the end: Stats() = %+v, %d attempts; want nothing in flight or waiting, 2 attempts", s, attempts)
		}
	})
}
