package retries

import "testing"

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
