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

// TestWallAboveExactCounts: above wallExact the counts share buckets 1/32
// of an octave wide. A wall at the start of a bucket (512 slots, 100) is
// found there; one inside a bucket (500 slots, in [496, 504); 1000, in
// [992, 1008)) at the start of the next, where every attempt meets
// backpressure: at most 1/32 above it.
func TestWallAboveExactCounts(t *testing.T) {
	t.Parallel()
	for n := uint32(1); n < wallTop; n++ {
		i := wallIndex(n)
		if s := wallStart(i); s > int(n) || i+1 < wallBuckets && wallStart(i+1) <= int(n) {
			t.Fatalf("count %d in bucket %d, which starts at %d (the next at %d)", n, i, s, wallStart(i+1))
		}
	}
	for _, tc := range []struct{ slots, want int }{{512, 512}, {500, 504}, {100, 100}, {1000, 1008}} {
		var w wall
		var throttled, total float64
		// 20 attempts at each count from half the slots to 9/8 of them,
		// interleaved as a server's outcomes are, 9 in 10 of those at or
		// above the slots meeting backpressure.
		for i := range 20 {
			for n := tc.slots / 2; n <= tc.slots*9/8; n++ {
				th := n >= tc.slots && i%10 != 0
				w.record(uint32(n), th, 0)
				if th {
					throttled++
				}
				total++
			}
		}
		if got := w.at(throttled/total, 0); got != tc.want {
			t.Errorf("%d slots: wall.at() = %d, want %d", tc.slots, got, tc.want)
		}
	}
}
