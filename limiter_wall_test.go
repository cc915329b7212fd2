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
					// Outcomes interleaved, as a server's are: i's bits
					// reversed spread the throttled ones over the 100.
					th := float64(bitrev7(i)) < 128*tc.share(n)
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

// bitrev7 returns i's lowest 7 bits in reverse order.
func bitrev7(i int) int {
	r := 0
	for range 7 {
		r, i = r<<1|i&1, i>>1
	}
	return r
}

// TestWallLetsGoOfAFalseWall: however many attempts made a wall (a burst
// against a rate limiter in slow start can make hundreds at 2 in flight),
// it is let go within 1.4 × wallMemory once no new evidence comes, so that
// the limit may grow past it again; with the evidence of a few it is
// still there after one wallMemory.
func TestWallLetsGoOfAFalseWall(t *testing.T) {
	t.Parallel()
	for _, attempts := range []int{100, 1000} {
		var w wall
		for i := range attempts {
			w.record(2, i%2 == 0, 0)
		}
		if got := w.at(0.05, 0); got != 2 {
			t.Fatalf("%d attempts: wall.at() = %d, want 2", attempts, got)
		}
		if got := w.at(0.05, wallMemory); got != 2 {
			t.Errorf("%d attempts: wall.at() after %v = %d, want 2 still", attempts, wallMemory, got)
		}
		if got := w.at(0.05, wallMemory*14/10); got != 0 {
			t.Errorf("%d attempts: wall.at() after %v = %d, want 0", attempts, wallMemory*14/10, got)
		}
	}
}
