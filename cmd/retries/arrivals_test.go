package main

import (
	"math"
	"testing"
	"time"
)

// TestArrivals: constant arrivals are evenly spaced, rate × d of them;
// poisson ones have exponential gaps: their mean is 1/rate and their
// coefficient of variation about 1 (a constant's is 0).
func TestArrivals(t *testing.T) {
	t.Parallel()
	if n := dueBefore(newArrivals(300, false, 1), 10*time.Second); n != 3000 {
		t.Errorf("constant: %d queries due in 10 s at 300/s, want 3000", n)
	}
	c := newArrivals(300, false, 1)
	if mean, cv := gaps(c, 3000); math.Abs(mean-1.0/300) > 1e-6 || cv > 1e-3 {
		t.Errorf("constant: mean gap %.6f s, CV %.3f; want 1/300 s and 0", mean, cv)
	}
	for seed := range uint64(5) {
		if n := dueBefore(newArrivals(300, true, seed), 10*time.Second); n < 3000-5*55 || n > 3000+5*55 {
			t.Errorf("poisson, seed %d: %d queries due in 10 s at 300/s, want about 3000 (±5 standard deviations)", seed, n)
		}
		p := newArrivals(300, true, seed)
		mean, cv := gaps(p, 20000)
		if math.Abs(mean*300-1) > 0.03 || cv < 0.95 || cv > 1.05 {
			t.Errorf("poisson, seed %d: mean gap %.6f s (%.3f of 1/300), CV %.3f; want within 3 %% and 0.95–1.05", seed, mean, mean*300, cv)
		}
	}
}

// gaps returns the mean (in seconds) and the coefficient of variation of
// the gaps between a's first n arrivals.
func gaps(a *arrivals, n int) (mean, cv float64) {
	var prev time.Duration
	var sum, sq float64
	for i := range int64(n + 1) {
		at := a.due(i)
		if i > 0 {
			g := (at - prev).Seconds()
			sum, sq = sum+g, sq+g*g
		}
		prev = at
	}
	mean = sum / float64(n)
	return mean, math.Sqrt(max(sq/float64(n)-mean*mean, 0)) / mean
}

// dueBefore counts a's queries due before d, as runRate sends them.
func dueBefore(a *arrivals, d time.Duration) int64 {
	var n int64
	for a.due(n) < d {
		n++
	}
	return n
}
