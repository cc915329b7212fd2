package retries_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/seed32e55400/retries"
)

// BenchmarkLimiter measures Acquire plus Release(SignalSuccess) on one
// goroutine (far below the limit: the lock-free path) and from 64 goroutines
// at once (the limiter's default in-flight limit then binds, so calls queue).
func BenchmarkLimiter(b *testing.B) {
	ctx := context.Background()
	b.Run("goroutines=1", func(b *testing.B) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		b.ReportAllocs()
		for b.Loop() {
			p, err := l.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(retries.SignalSuccess)
		}
	})
	b.Run("goroutines=64", func(b *testing.B) {
		l := retries.NewLimiter(retries.LimiterConfig{})
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 goroutines
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := l.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Release(retries.SignalSuccess)
			}
		})
	})
}

// BenchmarkDoLimiter compares a first-try Policy.Do with and without a
// limiter: the cost the limiter adds to a call that succeeds at once.
func BenchmarkDoLimiter(b *testing.B) {
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)))
	b.Run("limiter=none", func(b *testing.B) { benchDo(b, p, 1) })
	b.Run("limiter=yes", func(b *testing.B) {
		benchDo(b, p.Copy(retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{}))), 1)
	})
}
