package retries

import (
	"testing"
	"time"
)

// TestWall checks the concurrency wall estimator: a share of backpressure
// that steps up at some count in flight is a wall; backpressure spread
// evenly over the counts, as a rate limiter gives, is not; and the
// evidence decays.
func TestWall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		share func(n int) float64 // backpressure share of attempts sent at n
		want  int
	}{
		{"wall_at_13", func(n int) float64 { return map[bool]float64{true: 0.5, false: 0}[n >= 13] }, 13},
		{"rate_limiter", func(int) float64 { return 0.02 }, 0},
		{"overloaded_rate_limiter", func(int) float64 { return 0.5 }, 0},
		{"none", func(int) float64 { return 0 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w wall
			var throttled, total float64
			for n := 1; n <= 16; n++ {
				for i := range 100 {
					th := float64(i) < 100*tc.share(n)
					w.record(uint32(n), th, 0)
					if th {
						throttled++
					}
					total++
				}
			}
			if got := w.at(throttled/total, 0); got != tc.want {
				t.Errorf("wall.at() = %d, want %d", got, tc.want)
			}
			// The evidence decays: after 4 time constants no wall is left.
			if got := w.at(throttled/total, 4*wallMemory); got != 0 {
				t.Errorf("wall.at() after %v = %d, want 0", 4*wallMemory, got)
			}
		})
	}
}

// TestWallIgnoresPacedAttempts: attempts that the rate limit paced say
// nothing of a wall. Against a rate limiter the second attempt of a pair
// sent close together meets backpressure far more often than one sent
// alone, which looks like a wall at 2; the control law takes that evidence
// only from attempts that were not paced.
func TestWallIgnoresPacedAttempts(t *testing.T) {
	t.Parallel()
	for _, paced := range []bool{true, false} {
		c := newControl(LimiterConfig{MaxInFlight: 256, MinRate: 1})
		c.slowStart = false
		c.bucket.start(1000, 0)
		now := time.Duration(0)
		for i := range 3000 {
			now += time.Millisecond
			n, sig := uint32(1), SignalSuccess
			if i%4 == 3 {
				n = 2
				if i%12 == 3 {
					sig = SignalBackpressure // a third of the attempts sent at 2
				}
			}
			c.learn(sample{n: n, sent: now - time.Millisecond, rateBound: paced, paced: paced}, sig, now)
		}
		want := 2
		if paced {
			want = 0
		}
		if c.wallAt != want {
			t.Errorf("paced %v: wall at %d, want %d", paced, c.wallAt, want)
		}
	}
}
