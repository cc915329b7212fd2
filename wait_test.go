package retries_test

import (
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/seed32e55400/retries"
)

// The vectors below are in seconds unless noted. A comment names the
// tenacity or pyvespa test a vector comes from; vectors without one are this
// package's own, several of them checked by running tenacity's strategies
// past what its tests cover.

const maxDuration = time.Duration(math.MaxInt64)

func at(n int) retries.State { return retries.State{Attempt: n} }

// TestDeterministicWaits checks waits that have a single value per attempt:
// Duration and both Bounds must all equal the vector.
func TestDeterministicWaits(t *testing.T) {
	t.Parallel()
	s := time.Second
	exp := func(e retries.Exponential) retries.Wait { return retries.WaitExponential(e) }
	for _, tc := range []struct {
		name string
		w    retries.Wait
		n    []int
		want []time.Duration
	}{
		// tenacity test_no_sleep
		{"none", retries.WaitNone(), []int{18}, []time.Duration{0}},
		// tenacity test_fixed_sleep
		{"fixed", retries.WaitFixed(s), []int{12}, []time.Duration{s}},
		// tenacity test_incrementing_sleep
		{"incrementing", retries.WaitIncrementing(500*s, 100*s, 0), []int{1, 2, 3}, []time.Duration{500 * s, 600 * s, 700 * s}},
		{"incrementing_capped", retries.WaitIncrementing(0, 5*s, 12*s), []int{1, 2, 3, 4, 5}, []time.Duration{0, 5 * s, 10 * s, 12 * s, 12 * s}},
		{"incrementing_negative", retries.WaitIncrementing(10*s, -4*s, 0), []int{1, 2, 3, 4}, []time.Duration{10 * s, 6 * s, 2 * s, 0}},
		// tenacity test_exponential
		{"exponential", exp(retries.Exponential{}), []int{1, 2, 3, 4, 5, 6, 7, 8},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s}},
		// tenacity test_exponential_with_max_wait
		{"exponential_max", exp(retries.Exponential{Max: 40 * s}), []int{1, 2, 3, 4, 5, 6, 7, 8, 50},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 40 * s, 40 * s, 40 * s}},
		// tenacity test_exponential_with_max_wait_and_multiplier
		{"exponential_max_multiplier", exp(retries.Exponential{Multiplier: s, Max: 50 * s}), []int{6, 7, 8, 50},
			[]time.Duration{32 * s, 50 * s, 50 * s, 50 * s}},
		// tenacity test_exponential_with_min_wait
		{"exponential_min", exp(retries.Exponential{Min: 20 * s}), []int{1, 2, 3, 4, 5, 6, 7, 8, 20},
			[]time.Duration{20 * s, 20 * s, 20 * s, 20 * s, 20 * s, 32 * s, 64 * s, 128 * s, 524288 * s}},
		// tenacity test_exponential_with_min_wait_and_multiplier
		{"exponential_min_multiplier", exp(retries.Exponential{Min: 20 * s, Multiplier: 2 * s}), []int{1, 2, 3, 4, 5, 6, 7, 8, 20},
			[]time.Duration{20 * s, 20 * s, 20 * s, 20 * s, 32 * s, 64 * s, 128 * s, 256 * s, 1048576 * s}},
		// tenacity test_exponential_with_min_wait_andmax__wait
		{"exponential_min_max", exp(retries.Exponential{Min: 10 * s, Max: 100 * s}), []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 20},
			[]time.Duration{10 * s, 10 * s, 10 * s, 10 * s, 16 * s, 32 * s, 64 * s, 100 * s, 100 * s, 100 * s}},
		// tenacity test_exponential_caps_when_max_multiplier_ratio_underflows
		{"multiplier_over_max", exp(retries.Exponential{Multiplier: maxDuration, Max: time.Nanosecond}), []int{1, 2, 5000},
			[]time.Duration{1, 1, 1}},
		{"min_over_max_min_wins", exp(retries.Exponential{Multiplier: 1500 * time.Millisecond, Min: 10 * s, Max: 5 * s}), []int{1, 2000},
			[]time.Duration{10 * s, 10 * s}},
		{"no_overflow_max_10s", exp(retries.Exponential{Max: 10 * s}), []int{64, 65, 1025, 1100, 5000, math.MaxInt},
			[]time.Duration{10 * s, 10 * s, 10 * s, 10 * s, 10 * s, 10 * s}},
		{"no_overflow_max_60s", exp(retries.Exponential{Multiplier: 1500 * time.Millisecond, Max: 60 * s}), []int{64, 1025, 5000},
			[]time.Duration{60 * s, 60 * s, 60 * s}},
		{"default_max_saturates", exp(retries.Exponential{}), []int{34, 35, 100, 5000},
			[]time.Duration{(1 << 33) * s, maxDuration, maxDuration, maxDuration}},
		{"base_3", exp(retries.Exponential{Multiplier: 100 * time.Millisecond, Base: 3}), []int{1, 2, 3},
			[]time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond}},
		// tenacity test_wait_exponential_jitter_multiplier
		{"jitter_zero", retries.WaitExponentialJitter(retries.Exponential{Multiplier: 10 * s, Max: 60 * s}, 0), []int{1, 2, 3, 4},
			[]time.Duration{10 * s, 20 * s, 40 * s, 60 * s}},
		// tenacity test_wait_exponential_jitter
		{"jitter_capped", retries.WaitExponentialJitter(retries.Exponential{Multiplier: 10 * s, Max: 5 * s}, s), []int{1},
			[]time.Duration{5 * s}},
		// tenacity test_wait_exponential_jitter
		{"jitter_capped_exactly", retries.WaitExponentialJitter(retries.Exponential{Max: 60 * s}, s), []int{7, 8, 9},
			[]time.Duration{60 * s, 60 * s, 60 * s}},
		// tenacity test_wait_exponential_jitter_min
		{"jitter_min", retries.WaitExponentialJitter(retries.Exponential{Min: 5 * s, Max: 60 * s}, s), []int{1, 2, 3},
			[]time.Duration{5 * s, 5 * s, 5 * s}},
		// tenacity test_wait_random_exponential
		{"random_exponential_min", retries.WaitRandomExponential(retries.Exponential{Min: 5 * s}), []int{1},
			[]time.Duration{5 * s}},
		// tenacity test_wait_chain
		{"chain", retries.WaitChain(retries.WaitFixed(s), retries.WaitFixed(s), retries.WaitFixed(4*s), retries.WaitFixed(4*s), retries.WaitFixed(8*s)),
			[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []time.Duration{s, s, 4 * s, 4 * s, 8 * s, 8 * s, 8 * s, 8 * s, 8 * s, 8 * s}},
		{"chain_global_attempt", retries.WaitChain(retries.WaitFixed(s), retries.WaitExponential(retries.Exponential{})),
			[]int{1, 2, 3, 4, 5}, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s}},
		{"combine_saturates", retries.WaitCombine(retries.WaitFixed(maxDuration-1), retries.WaitFixed(s)), []int{1},
			[]time.Duration{maxDuration}},
		{"combine_empty", retries.WaitCombine(), []int{1}, []time.Duration{0}},
		// tenacity test_wait_func
		{"func", retries.WaitFunc(func(s retries.State) time.Duration { return time.Duration(s.Attempt) * s.Elapsed }),
			nil, nil}, // checked below with elapsed times
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, n := range tc.n {
				d := tc.w.Duration(at(n))
				lo, hi := tc.w.Bounds(at(n))
				if d != tc.want[i] || lo != tc.want[i] || hi != tc.want[i] {
					t.Errorf("attempt %d: Duration() = %v, Bounds() = [%v, %v], want %v", n, d, lo, hi, tc.want[i])
				}
			}
		})
	}
	f := retries.WaitFunc(func(s retries.State) time.Duration { return time.Duration(s.Attempt) * s.Elapsed })
	for _, v := range []struct {
		n       int
		elapsed time.Duration
		want    time.Duration
	}{{1, 5 * s, 5 * s}, {2, 11 * s, 22 * s}, {10, 100 * s, 1000 * s}} {
		if got := f.Duration(retries.State{Attempt: v.n, Elapsed: v.elapsed}); got != v.want {
			t.Errorf("WaitFunc(%d, %v) = %v, want %v", v.n, v.elapsed, got, v.want)
		}
	}
	if got := retries.WaitFunc(func(retries.State) time.Duration { return -time.Second }).Duration(at(1)); got != 0 {
		t.Errorf("WaitFunc returning -1s = %v, want 0", got)
	}
}

// TestRandomWaits draws each random wait many times and checks every draw
// against its bounds, that the bounds are the vector's, that the draws vary,
// and, for full jitter, the mean (tenacity
// test_wait_random_exponential_statistically).
func TestRandomWaits(t *testing.T) {
	t.Parallel()
	s := time.Second
	golden := func(n int) time.Duration { return secs(0.1 * math.Pow(1.618, float64(n-1))) }
	type bound struct {
		n      int
		prev   time.Duration
		lo, hi time.Duration
	}
	for _, tc := range []struct {
		name   string
		w      retries.Wait
		bounds []bound
		mean   bool // uniform: the draws vary and their mean is (lo+hi)/2 within 8%
	}{
		// tenacity test_random_sleep
		{"random", retries.WaitRandom(s, 20*s), []bound{{n: 1, lo: s, hi: 20 * s}}, true},
		// tenacity test_random_sleep_withoutmin_
		{"random_no_min", retries.WaitRandom(0, 2*s), []bound{{n: 1, hi: 2 * s}}, true},
		// tenacity test_wait_random_exponential and …_statistically
		{"random_exponential", retries.WaitRandomExponential(retries.Exponential{Multiplier: s / 2, Max: 60 * s}),
			[]bound{{n: 1, hi: s / 2}, {n: 2, hi: s}, {n: 3, hi: 2 * s}, {n: 4, hi: 4 * s}, {n: 5, hi: 8 * s},
				{n: 6, hi: 16 * s}, {n: 7, hi: 32 * s}, {n: 8, hi: 60 * s}, {n: 9, hi: 60 * s}}, true},
		// tenacity test_wait_random_exponential
		{"random_exponential_capped", retries.WaitRandomExponential(retries.Exponential{Multiplier: 10 * s, Max: 5 * s}),
			[]bound{{n: 1, hi: 5 * s}}, true},
		// tenacity test_wait_exponential_jitter
		{"exponential_jitter", retries.WaitExponentialJitter(retries.Exponential{Max: 60 * s}, s),
			[]bound{{n: 1, lo: s, hi: 2 * s}, {n: 2, lo: 2 * s, hi: 3 * s}, {n: 3, lo: 4 * s, hi: 5 * s},
				{n: 4, lo: 8 * s, hi: 9 * s}, {n: 5, lo: 16 * s, hi: 17 * s}, {n: 6, lo: 32 * s, hi: 33 * s}}, true},
		// tenacity test_wait_exponential_jitter_min
		{"exponential_jitter_min", retries.WaitExponentialJitter(retries.Exponential{Min: 5 * s, Max: 60 * s}, s),
			[]bound{{n: 4, lo: 8 * s, hi: 9 * s}}, true},
		// tenacity test_wait_combine
		{"combine", retries.WaitCombine(retries.WaitRandom(0, 3*s), retries.WaitFixed(5*s)),
			[]bound{{n: 1, lo: 5 * s, hi: 8 * s}}, true},
		// tenacity test_wait_triple_sum
		{"triple_combine", retries.WaitCombine(retries.WaitFixed(s), retries.WaitRandom(0, 3*s), retries.WaitFixed(5*s)),
			[]bound{{n: 1, lo: 6 * s, hi: 9 * s}}, true},
		// pyvespa test_wait_golden_jitter_matches_legacy_formula
		{"golden", retries.WaitGoldenJitter(),
			[]bound{{n: 1, lo: golden(1), hi: golden(1) + s}, {n: 4, lo: golden(4), hi: golden(4) + s},
				{n: 11, lo: golden(11), hi: golden(11) + s}}, true},
		{"decorrelated_first", retries.WaitDecorrelatedJitter(s, 30*s), []bound{{n: 1, lo: s, hi: s}}, false},
		{"decorrelated", retries.WaitDecorrelatedJitter(s, 30*s), []bound{{n: 2, prev: 2 * s, lo: s, hi: 6 * s}}, true},
		// U(1 s, 60 s) capped at 30 s: about half the draws are exactly 30 s.
		{"decorrelated_capped", retries.WaitDecorrelatedJitter(s, 30*s), []bound{{n: 3, prev: 20 * s, lo: s, hi: 30 * s}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range tc.bounds {
				st := retries.State{Attempt: b.n, PrevWait: b.prev}
				lo, hi := tc.w.Bounds(st)
				if absDiff(lo, b.lo) > time.Microsecond || absDiff(hi, b.hi) > time.Microsecond {
					t.Errorf("attempt %d: Bounds() = [%v, %v], want [%v, %v]", b.n, lo, hi, b.lo, b.hi)
				}
				const draws = 4000
				var sum float64
				distinct := map[time.Duration]bool{}
				for range draws {
					d := tc.w.Duration(st)
					if d < lo || d > hi {
						t.Fatalf("attempt %d: Duration() = %v, want within [%v, %v]", b.n, d, lo, hi)
					}
					sum += d.Seconds()
					distinct[d] = true
				}
				if tc.mean && lo != hi && len(distinct) < draws/2 {
					t.Errorf("attempt %d: %d distinct values in %d draws", b.n, len(distinct), draws)
				}
				if mid := (lo + hi).Seconds() / 2; tc.mean && lo != hi && math.Abs(sum/draws-mid) > 0.08*mid {
					t.Errorf("attempt %d: mean = %gs, want %gs ± 8%%", b.n, sum/draws, mid)
				}
			}
		})
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// TestGoldenSaturates checks pyvespa's uncapped golden wait past Python's
// OverflowError at attempt 1477: it saturates at the largest Duration instead.
func TestGoldenSaturates(t *testing.T) {
	t.Parallel()
	w := retries.WaitGoldenJitter()
	prev := time.Duration(0)
	for n := 1; n <= 2000; n++ {
		lo, hi := w.Bounds(at(n))
		if lo < prev || hi < lo {
			t.Fatalf("attempt %d: Bounds() = [%v, %v] after a lower bound of %v: not monotone", n, lo, hi, prev)
		}
		prev = lo
	}
	if lo, _ := w.Bounds(at(53)); lo == maxDuration {
		t.Errorf("attempt 53: lower bound saturated, want it finite")
	}
	for _, n := range []int{54, 1476, 1477, 1_000_000} {
		if lo, hi := w.Bounds(at(n)); lo != maxDuration || hi != maxDuration {
			t.Errorf("attempt %d: Bounds() = [%v, %v], want the largest Duration", n, lo, hi)
		}
	}
}

func TestWaitBackOffBounds(t *testing.T) {
	t.Parallel()
	w := retries.WaitBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(3 * time.Second) })
	if lo, hi := w.Bounds(at(1)); lo != 3*time.Second || hi != 3*time.Second || w.Duration(at(1)) != 3*time.Second {
		t.Errorf("Bounds() = [%v, %v], want 3s", lo, hi)
	}
}

func TestWaitString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		w    retries.Wait
		want string
	}{
		{retries.Wait{}, "WaitNone()"},
		{retries.WaitFixed(time.Second), "WaitFixed(1s)"},
		{retries.WaitRandom(0, 2*time.Second), "WaitRandom(0s, 2s)"},
		{retries.WaitIncrementing(0, 5*time.Second, 0), "WaitIncrementing(start=0s, increment=5s, max=none)"},
		{retries.WaitExponential(retries.Exponential{Max: 3 * time.Second}), "WaitExponential(multiplier=1s, base=2, min=0s, max=3s)"},
		{retries.WaitExponentialJitter(retries.Exponential{Base: 3}, time.Second), "WaitExponentialJitter(multiplier=1s, base=3, min=0s, max=none, jitter=1s)"},
		{retries.WaitDecorrelatedJitter(time.Second, time.Minute), "WaitDecorrelatedJitter(base=1s, max=1m0s)"},
		{retries.WaitChain(retries.WaitFixed(1), retries.WaitNone()), "WaitChain(WaitFixed(1ns), WaitNone())"},
		{retries.WaitCombine(retries.WaitFixed(time.Second), retries.WaitGoldenJitter()), "WaitCombine(WaitFixed(1s), WaitGoldenJitter(0.1s × 1.618^(n−1) + U(0, 1s)))"},
	} {
		if got := tc.w.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
