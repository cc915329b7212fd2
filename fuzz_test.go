package retries

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// The fuzz targets here check the arithmetic of every wait and stop at the
// extremes: attempt numbers up to math.MaxInt, durations up to the largest
// Duration, any base and any uniform draw. They reach the unexported pure
// helpers (the at methods, fromNanos, addSat) so that the checks are exact
// and do not depend on math/rand. The main behaviour of each wait is tested
// elsewhere; these keep to overflow, saturation and invariants.

// fuzzAttempt maps any int64 onto an attempt number in [1, math.MaxInt],
// keeping positive numbers as they are.
func fuzzAttempt(raw int64) int {
	switch {
	case raw >= 1:
		return int(raw)
	case raw < 1-math.MaxInt64: // 1 - raw would overflow
		return math.MaxInt
	}
	return int(1 - raw)
}

// fuzzDur maps any int64 onto a non-negative Duration, keeping its size.
func fuzzDur(raw int64) time.Duration {
	if raw < 0 {
		raw = -(raw + 1)
	}
	return time.Duration(raw)
}

// fuzzUnit maps any float64 onto [0, 1].
func fuzzUnit(u float64) float64 {
	switch {
	case math.IsNaN(u) || math.IsInf(u, 0):
		return 1
	case u < 0 || u > 1:
		u = math.Abs(u)
		return u - math.Floor(u)
	}
	return u
}

// fuzzBase maps any float64 onto a valid Exponential.Base: finite and not
// negative (0 means the default, 2).
func fuzzBase(b float64) float64 {
	if math.IsNaN(b) || math.IsInf(b, 0) {
		return 1.618
	}
	return math.Abs(b)
}

// satSum is a reference saturating sum of non-negative durations, written
// differently from addSat.
func satSum(ds ...time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		if d > maxWait-s {
			return maxWait
		}
		s += d
	}
	return s
}

// satAddSigned is the exact sum of a and b, clamped to the range of
// Duration: the saturating add that the stop formulas are written with.
func satAddSigned(a, b time.Duration) time.Duration {
	s := new(big.Int).Add(big.NewInt(int64(a)), big.NewInt(int64(b)))
	switch {
	case s.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return maxWait
	case s.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return time.Duration(s.Int64())
}

// approxLE reports whether a <= b up to a few units in the last place of
// a float64, the precision the waits are computed in.
func approxLE(a, b time.Duration) bool {
	return float64(a) <= float64(b)*(1+1e-15)+1
}

// catchPanic runs f and returns the value it panicked with, if any.
func catchPanic(f func()) (msg string, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, panicked = fmt.Sprint(r), true
		}
	}()
	f()
	return "", false
}

// mustBuild calls a constructor and checks that it panics, with a message
// starting "retries:", exactly when the parameters are invalid. It reports
// whether a value was built.
func mustBuild[T any](t *testing.T, name string, valid bool, mk func() T) (T, bool) {
	t.Helper()
	var v T
	msg, panicked := catchPanic(func() { v = mk() })
	switch {
	case valid && panicked:
		t.Fatalf("%s panicked on valid parameters: %s", name, msg)
	case !valid && !panicked:
		t.Fatalf("%s = %v on invalid parameters, want a panic", name, v)
	case panicked && !strings.HasPrefix(msg, "retries:"):
		t.Fatalf("%s panicked with %q, want a message starting \"retries:\"", name, msg)
	}
	return v, valid
}

// checkWait checks what holds for every wait and every state: it does not
// panic, Bounds gives 0 <= lo <= hi, and a draw lies within the bounds.
// It returns the bounds.
func checkWait(t *testing.T, name string, w Wait, s State) (lo, hi time.Duration) {
	t.Helper()
	lo, hi = w.Bounds(s)
	if lo < 0 || lo > hi {
		t.Fatalf("%s.Bounds(%+v) = %v, %v, want 0 <= lo <= hi", name, s, lo, hi)
	}
	if d := w.Duration(s); d < lo || d > hi {
		t.Fatalf("%s.Duration(%+v) = %v, want within Bounds [%v, %v]", name, s, d, lo, hi)
	}
	if d := w.nextOrStop(s); d != stopWait && (d < lo || d > hi) {
		t.Fatalf("%s.next(%+v) = %v, want within Bounds [%v, %v]", name, s, d, lo, hi)
	}
	if w.String() == "" {
		t.Fatalf("%s.String() is empty", name)
	}
	return lo, hi
}

// normExpo returns the clamp interval of e after its defaults are applied:
// the result always lies in [min, max], and min > max means min wins.
func normExpo(e Exponential) (lo, hi time.Duration) {
	lo, hi = e.Min, e.Max
	if hi == 0 {
		hi = maxWait
	}
	return lo, max(lo, hi)
}

// policyWaitCaps lists each policy's wait and the range every one of its
// waits must lie in, for any attempt number.
var policyWaitCaps = []struct {
	name   string
	p      *Policy
	lo, hi time.Duration
}{
	{"Query", &Query, 0, 60 * time.Second},
	{"DocV1", &DocV1, time.Second, maxWait},
	{"Throttle", &Throttle, 0, 10 * time.Second},
	{"SyncRequest", &SyncRequest, 100 * time.Millisecond, maxWait},
	{"Visit", &Visit, 0, 0},
	{"ControlPlane", &ControlPlane, time.Second, 3 * time.Second},
	{"URLValidation", &URLValidation, time.Second, 10 * time.Second},
}

func FuzzWaits(f *testing.F) {
	// attempt, d1, d2, d3, prev, base, u
	f.Add(int64(1), int64(time.Second), int64(0), int64(10*time.Second), int64(0), 2.0, 0.5)
	f.Add(int64(64), int64(time.Second), int64(0), int64(10*time.Second), int64(time.Second), 2.0, 1.0)
	f.Add(int64(65), int64(1500*time.Millisecond), int64(0), int64(60*time.Second), int64(0), 2.0, 0.0)
	f.Add(int64(1000), int64(time.Second), int64(time.Second), int64(3*time.Second), int64(2*time.Second), 2.0, 0.999)
	f.Add(int64(1e6), int64(100*time.Millisecond), int64(0), int64(0), int64(0), 1.618, 0.25)
	f.Add(int64(math.MaxInt32), int64(time.Second), int64(5*time.Second), int64(time.Second), int64(0), 10.0, 0.75)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1e308, 1.0)
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(-1), int64(math.MinInt64), int64(math.MinInt64), -2.0, -0.5)
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), 0.0, 0.0)
	f.Add(int64(1477), int64(time.Second), int64(12*time.Second), int64(-4*time.Second), int64(0), 0.5, 0.1)
	f.Add(int64(48), int64(1<<62), int64(math.MaxInt64), int64(1<<53), int64(1<<62), math.NaN(), math.Inf(1))
	f.Add(int64(3), int64(10*time.Second), int64(0), int64(-4*time.Second), int64(time.Hour), math.Inf(-1), math.NaN())
	f.Fuzz(func(t *testing.T, rawAttempt, d1, d2, d3, rawPrev int64, rawBase, rawU float64) {
		n := fuzzAttempt(rawAttempt)
		a, b, c := fuzzDur(d1), fuzzDur(d2), fuzzDur(d3)
		u := fuzzUnit(rawU)
		s := State{Attempt: n, PrevWait: fuzzDur(rawPrev), Elapsed: c}
		// raw is a state as a caller of Wait.Duration may pass it: any
		// attempt number, zero or negative included, and any PrevWait.
		raw := State{Attempt: int(rawAttempt), PrevWait: time.Duration(rawPrev)}

		// The pure helpers.
		for _, x := range []float64{rawBase, rawU, float64(d1), float64(d3) * 1e9} {
			got := fromNanos(x)
			switch {
			case got < 0:
				t.Fatalf("fromNanos(%v) = %v, want >= 0", x, got)
			case !(x > 0) && got != 0:
				t.Fatalf("fromNanos(%v) = %v, want 0", x, got)
			case x >= math.MaxInt64 && got != maxWait:
				t.Fatalf("fromNanos(%v) = %v, want the largest Duration", x, got)
			case x > 0 && x < math.MaxInt64 && got != time.Duration(x):
				t.Fatalf("fromNanos(%v) = %v, want %v", x, got, time.Duration(x))
			}
			if next := math.Nextafter(x, math.Inf(1)); !math.IsNaN(x) && fromNanos(next) < got {
				t.Fatalf("fromNanos(%v) = %v > fromNanos(%v) = %v, want monotone", x, got, next, fromNanos(next))
			}
		}
		if got, want := addSat(a, b), satSum(a, b); got != want || addSat(b, a) != want {
			t.Fatalf("addSat(%v, %v) = %v, want %v (both orders)", a, b, got, want)
		}

		// Zero and trivial waits.
		for name, w := range map[string]Wait{"Wait{}": {}, "WaitNone()": WaitNone(), "WaitCombine()": WaitCombine()} {
			for _, st := range []State{s, raw} {
				if lo, hi := checkWait(t, name, w, st); lo != 0 || hi != 0 {
					t.Fatalf("%s.Bounds = %v, %v, want 0, 0", name, lo, hi)
				}
			}
		}

		// WaitFixed.
		if w, ok := mustBuild(t, "WaitFixed", d1 >= 0, func() Wait { return WaitFixed(time.Duration(d1)) }); ok {
			if lo, hi := checkWait(t, "WaitFixed", w, raw); lo != hi || lo != time.Duration(d1) {
				t.Fatalf("WaitFixed(%v).Bounds = %v, %v, want it twice", time.Duration(d1), lo, hi)
			}
		}
		fixedA := WaitFixed(a)

		// WaitRandom.
		mustBuild(t, "WaitRandom", d1 >= 0 && d2 >= 0 && d1 <= d2, func() Wait {
			return WaitRandom(time.Duration(d1), time.Duration(d2))
		})
		rmin, rmax := min(a, b), max(a, b)
		rnd := WaitRandom(rmin, rmax)
		for _, st := range []State{s, raw} {
			if lo, hi := checkWait(t, "WaitRandom", rnd, st); lo != rmin || hi != rmax {
				t.Fatalf("WaitRandom(%v, %v).Bounds = %v, %v", rmin, rmax, lo, hi)
			}
		}
		if got := (random{lo: rmin, hi: rmax}).at(u); got < rmin || got > rmax {
			t.Fatalf("WaitRandom(%v, %v) at u=%v = %v, want within [min, max]", rmin, rmax, u, got)
		}

		// WaitIncrementing, with any increment.
		mustBuild(t, "WaitIncrementing", d1 >= 0 && d2 >= 0, func() Wait {
			return WaitIncrementing(time.Duration(d1), time.Duration(d3), time.Duration(d2))
		})
		inc := time.Duration(d3)
		incr := WaitIncrementing(a, inc, b)
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitIncrementing", incr, st)
		}
		got := incr.Duration(s)
		if b > 0 && got > b {
			t.Fatalf("WaitIncrementing(%v, %v, %v) after attempt %d = %v, more than max", a, inc, b, n, got)
		}
		// The exact value start + increment×(n−1), clamped to [0, max].
		exact := new(big.Int).Mul(big.NewInt(int64(inc)), big.NewInt(int64(n-1)))
		exact.Add(exact, big.NewInt(int64(a)))
		want := maxWait
		if b > 0 {
			want = b
		}
		switch {
		case exact.Sign() <= 0:
			want = 0
		case exact.IsInt64() && time.Duration(exact.Int64()) < want:
			want = time.Duration(exact.Int64())
		}
		// The float computation may round; the error is relative to the
		// size of the two terms.
		scale := float64(a) + math.Abs(float64(inc))*float64(n-1)
		if diff := math.Abs(float64(got) - float64(want)); diff > scale*1e-15+1 {
			t.Fatalf("WaitIncrementing(%v, %v, %v) after attempt %d = %v, want %v", a, inc, b, n, got, want)
		}
		if n < math.MaxInt {
			next := incr.Duration(State{Attempt: n + 1})
			if (inc >= 0 && next < got) || (inc < 0 && next > got) {
				t.Fatalf("WaitIncrementing(%v, %v, %v): %v after attempt %d, %v after %d, want monotone", a, inc, b, got, n, next, n+1)
			}
		}

		// The exponential family.
		validBase := rawBase >= 0 && !math.IsInf(rawBase, 0) // NaN fails the comparison
		rawE := Exponential{Multiplier: time.Duration(d1), Base: rawBase, Min: time.Duration(d2), Max: time.Duration(d3)}
		validE := d1 >= 0 && d2 >= 0 && d3 >= 0 && validBase
		mustBuild(t, "WaitExponential", validE, func() Wait { return WaitExponential(rawE) })
		mustBuild(t, "WaitRandomExponential", validE, func() Wait { return WaitRandomExponential(rawE) })
		mustBuild(t, "WaitExponentialJitter", validE && rawPrev >= 0, func() Wait {
			return WaitExponentialJitter(rawE, time.Duration(rawPrev))
		})

		e := Exponential{Multiplier: a, Base: fuzzBase(rawBase), Min: b, Max: c}
		elo, ehi := normExpo(e)
		ne := e.norm("test")
		expW := WaitExponential(e)
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitExponential", expW, st)
		}
		ed := expW.Duration(s)
		if ed < elo || ed > ehi {
			t.Fatalf("WaitExponential(%+v) after attempt %d = %v, want within [%v, %v]", e, n, ed, elo, ehi)
		}
		if n < math.MaxInt {
			next := expW.Duration(State{Attempt: n + 1})
			if (ne.Base >= 1 && next < ed) || (ne.Base <= 1 && next > ed) {
				t.Fatalf("WaitExponential(%+v): %v after attempt %d, %v after %d, want monotone", e, ed, n, next, n+1)
			}
		}

		randW := WaitRandomExponential(e)
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitRandomExponential", randW, st)
		}
		rx := randExpo{e: ne}
		rd := rx.at(n, u)
		if rd < elo || rd > ehi {
			t.Fatalf("WaitRandomExponential(%+v) after attempt %d at u=%v = %v, want within [%v, %v]", e, n, u, rd, elo, ehi)
		}
		if lo, hi := rx.at(n, 0), rx.at(n, 1); rd < lo || rd > hi || !approxLE(hi, ed) || !approxLE(ed, hi) {
			t.Fatalf("WaitRandomExponential(%+v) after attempt %d: %v at u=%v, range [%v, %v], want within it and up to WaitExponential's %v",
				e, n, rd, u, lo, hi, ed)
		}

		jitter := fuzzDur(rawPrev)
		jW := WaitExponentialJitter(e, jitter)
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitExponentialJitter", jW, st)
		}
		ej := expoJitter{e: ne, jitter: jitter}
		jd := ej.at(n, u)
		if jd < elo || jd > ehi || jd < ej.at(n, 0) || jd > ej.at(n, 1) {
			t.Fatalf("WaitExponentialJitter(%+v, %v) after attempt %d at u=%v = %v, want within [%v, %v] and [at(0), at(1)] = [%v, %v]",
				e, jitter, n, u, jd, elo, ehi, ej.at(n, 0), ej.at(n, 1))
		}
		if pow := float64(ne.Multiplier) * math.Pow(ne.Base, float64(n-1)); pow >= float64(ehi) && jd != ehi {
			t.Fatalf("WaitExponentialJitter(%+v, %v) after attempt %d = %v, want exactly max %v once the exponential part reaches it",
				e, jitter, n, jd, ehi)
		}

		// WaitDecorrelatedJitter.
		mustBuild(t, "WaitDecorrelatedJitter", d1 > 0 && d2 >= d1, func() Wait {
			return WaitDecorrelatedJitter(time.Duration(d1), time.Duration(d2))
		})
		dbase, dmax := max(min(a, b), 1), max(a, b, 1)
		dj := WaitDecorrelatedJitter(dbase, dmax)
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitDecorrelatedJitter", dj, st)
		}
		for _, prev := range []time.Duration{s.PrevWait, raw.PrevWait} {
			dd := decorrelated{base: dbase, max: dmax}.at(prev, u)
			if dd < dbase || dd > dmax {
				t.Fatalf("WaitDecorrelatedJitter(%v, %v) after a wait of %v at u=%v = %v, want within [base, max]", dbase, dmax, prev, u, dd)
			}
			if prev > 0 && dd > dbase && !approxLE(dd, satSum(prev, prev, prev)) {
				t.Fatalf("WaitDecorrelatedJitter(%v, %v) after a wait of %v at u=%v = %v, more than 3 × the previous wait", dbase, dmax, prev, u, dd)
			}
		}

		// WaitGoldenJitter: monotone in the attempt number, saturating.
		gw := WaitGoldenJitter()
		for _, st := range []State{s, raw} {
			checkWait(t, "WaitGoldenJitter", gw, st)
		}
		g := golden{}.at(n, u)
		if g < 100*time.Millisecond {
			t.Fatalf("WaitGoldenJitter after attempt %d at u=%v = %v, want at least 0.1 s", n, u, g)
		}
		if n < math.MaxInt {
			if next := (golden{}).at(n+1, u); next < g {
				t.Fatalf("WaitGoldenJitter at u=%v: %v after attempt %d, %v after %d, want non-decreasing", u, g, n, next, n+1)
			}
		}
		if n >= 54 && g != maxWait {
			t.Fatalf("WaitGoldenJitter after attempt %d at u=%v = %v, want the largest Duration", n, u, g)
		}

		// The policies' waits stay within their caps for any attempt.
		for _, pc := range policyWaitCaps {
			lo, hi := checkWait(t, pc.name, pc.p.Wait(), s)
			if lo < pc.lo || hi > pc.hi {
				t.Fatalf("%s.Wait().Bounds after attempt %d = %v, %v, want within [%v, %v]", pc.name, n, lo, hi, pc.lo, pc.hi)
			}
		}
		throttle := Throttle.Wait()
		if tx, ok := throttle.w.(randExpo); !ok {
			t.Fatalf("Throttle.Wait() is %T, want randExpo", throttle.w)
		} else if d := tx.at(n, u); d < 0 || d > 10*time.Second {
			t.Fatalf("Throttle's wait after attempt %d at u=%v = %v, want within [0, 10s]", n, u, d)
		}
		if _, hi := throttle.Bounds(s); n >= 5 && hi != 10*time.Second {
			t.Fatalf("Throttle.Wait().Bounds after attempt %d: max %v, want 10s", n, hi)
		}

		// WaitFunc and WaitBackOff.
		fw := WaitFunc(func(State) time.Duration { return time.Duration(d3) })
		if d := fw.Duration(raw); d != max(time.Duration(d3), 0) {
			t.Fatalf("WaitFunc returning %v: Duration = %v", time.Duration(d3), d)
		}
		bw := WaitBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(a) })
		if lo, hi := checkWait(t, "WaitBackOff", bw, s); lo != a || hi != a {
			t.Fatalf("WaitBackOff(constant %v).Bounds = %v, %v", a, lo, hi)
		}
		stopped := WaitBackOff(func() backoff.BackOff { return &backoff.StopBackOff{} })
		checkWait(t, "WaitBackOff(stop)", stopped, s)

		// WaitChain picks part min(max(n, 1), len) and passes n through.
		k := 1 + int(uint64(d3)%4)
		parts := make([]Wait, k)
		for i := range parts {
			parts[i] = WaitFixed(time.Duration(i + 1))
		}
		chain := WaitChain(parts...)
		for _, st := range []State{s, raw} {
			want := time.Duration(min(max(st.Attempt, 1), k))
			if lo, hi := checkWait(t, "WaitChain", chain, st); chain.Duration(st) != want || lo != want || hi != want {
				t.Fatalf("WaitChain of %d fixed waits after attempt %d = %v, bounds %v, %v, want %v", k, st.Attempt, chain.Duration(st), lo, hi, want)
			}
		}
		mixed := WaitChain(fixedA, expW, rnd)
		for _, st := range []State{s, raw} {
			i := min(max(st.Attempt, 1), 3) - 1
			plo, phi := []Wait{fixedA, expW, rnd}[i].Bounds(st)
			if lo, hi := checkWait(t, "WaitChain", mixed, st); lo != plo || hi != phi {
				t.Fatalf("WaitChain after attempt %d: bounds %v, %v, want part %d's %v, %v", st.Attempt, lo, hi, i, plo, phi)
			}
		}

		// WaitCombine sums, saturating, and never overflows.
		sum := WaitCombine(WaitFixed(a), WaitFixed(b), WaitFixed(c))
		if d, want := sum.Duration(raw), satSum(a, b, c); d != want {
			t.Fatalf("WaitCombine(WaitFixed(%v), WaitFixed(%v), WaitFixed(%v)) = %v, want %v", a, b, c, d, want)
		}
		combParts := []Wait{fixedA, rnd, expW, randW, jW, dj, gw, incr, bw}
		comb := WaitCombine(combParts...)
		for _, st := range []State{s, raw} {
			var los, his []time.Duration
			for _, p := range combParts {
				plo, phi := p.Bounds(st)
				los, his = append(los, plo), append(his, phi)
			}
			if lo, hi := checkWait(t, "WaitCombine", comb, st); lo != satSum(los...) || hi != satSum(his...) {
				t.Fatalf("WaitCombine after attempt %d: bounds %v, %v, want the saturated sums %v, %v", st.Attempt, lo, hi, satSum(los...), satSum(his...))
			}
		}
		if d := WaitCombine(fixedA, stopped).nextOrStop(s); d != stopWait {
			t.Fatalf("WaitCombine with a stopped BackOff: next = %v, want stopWait", d)
		}
	})
}

func FuzzStops(f *testing.F) {
	// attempt, elapsed, wait, n, d, mask
	f.Add(int64(1), int64(0), int64(0), int64(3), int64(time.Second), uint8(0))
	f.Add(int64(3), int64(time.Second), int64(time.Second), int64(3), int64(2*time.Second), uint8(0xff))
	f.Add(int64(2), int64(9*time.Second), int64(time.Second), int64(0), int64(10*time.Second), uint8(0x15))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), uint8(0x2a))
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), uint8(1))
	f.Add(int64(-1), int64(math.MaxInt64-1), int64(2), int64(1), int64(math.MaxInt64), uint8(0x0c))
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(0), int64(-1), int64(-1), uint8(0x33))
	f.Add(int64(2), int64(-time.Second), int64(3*time.Second), int64(2), int64(2*time.Second), uint8(0xc6))
	f.Fuzz(func(t *testing.T, attempt, elapsed, wait, rawN, rawD int64, mask uint8) {
		s := State{Attempt: int(attempt), Elapsed: time.Duration(elapsed), Wait: time.Duration(wait)}

		// Construction: a negative argument panics with "retries:".
		mustBuild(t, "StopAfterAttempt", rawN >= 0, func() Stop { return StopAfterAttempt(int(rawN)) })
		mustBuild(t, "StopAfterDelay", rawD >= 0, func() Stop { return StopAfterDelay(time.Duration(rawD)) })
		mustBuild(t, "StopBeforeDelay", rawD >= 0, func() Stop { return StopBeforeDelay(time.Duration(rawD)) })

		n := int(fuzzDur(rawN))
		d := fuzzDur(rawD)
		parts := []struct {
			stop Stop
			want bool
		}{
			{StopAfterAttempt(n), s.Attempt >= n},
			{StopAfterDelay(d), s.Elapsed >= d},
			{StopBeforeDelay(d), satAddSigned(s.Elapsed, s.Wait) >= d},
			{StopNever(), false},
			{Stop{}, true},
			{StopIf(func(st State) bool { return st.Attempt%2 == 0 }), s.Attempt%2 == 0},
		}
		for _, p := range parts {
			if got := p.stop.Check(s); got != p.want {
				t.Fatalf("%v.Check(%+v) = %v, want %v", p.stop, s, got, p.want)
			}
			if p.stop.String() == "" {
				t.Fatalf("%T: empty String()", p.stop.s)
			}
		}

		if StopAny().Check(s) {
			t.Fatalf("StopAny().Check(%+v) = true, want false", s)
		}
		if !StopAll().Check(s) {
			t.Fatalf("StopAll().Check(%+v) = false, want true", s)
		}

		// Any and All over the parts the mask selects agree with || and &&.
		var chosen []Stop
		anyWant, allWant := false, true
		for i, p := range parts {
			if mask&(1<<i) != 0 {
				chosen = append(chosen, p.stop)
				anyWant = anyWant || p.want
				allWant = allWant && p.want
			}
		}
		anyStop, allStop := StopAny(chosen...), StopAll(chosen...)
		if got := anyStop.Check(s); got != anyWant {
			t.Fatalf("%v.Check(%+v) = %v, want %v", anyStop, s, got, anyWant)
		}
		if got := allStop.Check(s); got != allWant {
			t.Fatalf("%v.Check(%+v) = %v, want %v", allStop, s, got, allWant)
		}
		// Nesting composes the same way.
		last := parts[int(mask>>6)]
		if got, want := StopAny(allStop, last.stop).Check(s), allWant || last.want; got != want {
			t.Fatalf("StopAny(%v, %v).Check(%+v) = %v, want %v", allStop, last.stop, s, got, want)
		}
		if got, want := StopAll(anyStop, last.stop).Check(s), anyWant && last.want; got != want {
			t.Fatalf("StopAll(%v, %v).Check(%+v) = %v, want %v", anyStop, last.stop, s, got, want)
		}
	})
}

// TestWaitOverflowVectors checks waits at attempts far past where a power or
// a shift overflows, and the Go overflow pitfalls, through the unexported
// helpers.
func TestWaitOverflowVectors(t *testing.T) {
	t.Run("WaitExponential(1s, max 10s)", func(t *testing.T) {
		w := WaitExponential(Exponential{Multiplier: time.Second, Max: 10 * time.Second})
		for _, n := range []int{64, 65, 1025, 1100, 5000, 1e6, math.MaxInt32, math.MaxInt} {
			if got := w.nextOrStop(State{Attempt: n}); got != 10*time.Second {
				t.Errorf("next(attempt %d) = %v, want 10s", n, got)
			}
		}
	})
	t.Run("WaitExponential(1.5s, max 60s)", func(t *testing.T) {
		w := WaitExponential(Exponential{Multiplier: 1500 * time.Millisecond, Max: 60 * time.Second})
		for _, n := range []int{64, 1025, 5000} {
			if got := w.nextOrStop(State{Attempt: n}); got != 60*time.Second {
				t.Errorf("next(attempt %d) = %v, want 60s", n, got)
			}
		}
	})
	t.Run("Throttle's WaitRandomExponential(1s, max 10s)", func(t *testing.T) {
		rx, ok := Throttle.Wait().w.(randExpo)
		if !ok {
			t.Fatalf("Throttle.Wait() is %T, want randExpo", Throttle.Wait().w)
		}
		caps := []struct {
			n   int
			cap time.Duration
		}{
			{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second},
			{5, 10 * time.Second}, {6, 10 * time.Second}, {30, 10 * time.Second}, {64, 10 * time.Second},
			{65, 10 * time.Second}, {1000, 10 * time.Second}, {1100, 10 * time.Second}, {1e6, 10 * time.Second},
			{math.MaxInt, 10 * time.Second},
		}
		for _, c := range caps {
			if lo, hi := rx.at(c.n, 0), rx.at(c.n, 1); lo != 0 || hi != c.cap {
				t.Errorf("at(%d, 0), at(%d, 1) = %v, %v, want 0, %v", c.n, c.n, lo, hi, c.cap)
			}
			if got := rx.at(c.n, 0.5); got != c.cap/2 {
				t.Errorf("at(%d, 0.5) = %v, want %v", c.n, got, c.cap/2)
			}
		}
	})
	t.Run("WaitIncrementing", func(t *testing.T) {
		tests := []struct {
			start, inc, max time.Duration
			want            []time.Duration
		}{
			{0, 5 * time.Second, 12 * time.Second, []time.Duration{0, 5 * time.Second, 10 * time.Second, 12 * time.Second, 12 * time.Second}},
			{10 * time.Second, -4 * time.Second, 0, []time.Duration{10 * time.Second, 6 * time.Second, 2 * time.Second, 0}},
		}
		for _, tc := range tests {
			w := WaitIncrementing(tc.start, tc.inc, tc.max)
			for i, want := range tc.want {
				if got := w.nextOrStop(State{Attempt: i + 1}); got != want {
					t.Errorf("%v.next(attempt %d) = %v, want %v", w, i+1, got, want)
				}
			}
		}
	})
	t.Run("unbounded waits saturate", func(t *testing.T) {
		tests := []struct {
			name string
			got  time.Duration
		}{
			// tenacity's default max is past Go's largest Duration.
			{"WaitExponential() after attempt 100", WaitExponential(Exponential{}).nextOrStop(State{Attempt: 100})},
			{"DocV1's wait after attempt 1e6", DocV1.Wait().nextOrStop(State{Attempt: 1e6})},
			{"WaitIncrementing(0, max, 0) after attempt MaxInt", WaitIncrementing(0, maxWait, 0).nextOrStop(State{Attempt: math.MaxInt})},
			{"WaitExponentialJitter after attempt 1100", expoJitter{e: Exponential{}.norm("t"), jitter: maxWait}.at(1100, 1)},
			{"golden after attempt 54", golden{}.at(54, 0)},
			{"golden after attempt 1477 (OverflowError in Python)", golden{}.at(1477, 0.5)},
			{"golden after attempt MaxInt", golden{}.at(math.MaxInt, 1)},
			{"WaitCombine of two largest waits", WaitCombine(WaitFixed(maxWait), WaitFixed(maxWait)).nextOrStop(State{Attempt: 1})},
		}
		for _, tc := range tests {
			if tc.got != maxWait {
				t.Errorf("%s = %v, want the largest Duration %v", tc.name, tc.got, maxWait)
			}
		}
		// Golden jitter reaches the largest Duration at attempt 54, whatever
		// the draw; at attempt 53 it is still below.
		if g := (golden{}).at(53, 1); g >= maxWait {
			t.Errorf("golden after attempt 53 at u=1 = %v, want less than the largest Duration", g)
		}
	})
	t.Run("fromNanos", func(t *testing.T) {
		tests := []struct {
			in   float64
			want time.Duration
		}{
			{math.NaN(), 0}, {math.Inf(-1), 0}, {-1, 0}, {math.Copysign(0, -1), 0}, {0, 0}, {0.5, 0}, {1, 1},
			{1e9, time.Second}, {1 << 62, 1 << 62}, {math.Nextafter(1<<63, 0), 1<<63 - 1024},
			{1 << 63, maxWait}, {1e300, maxWait}, {math.Inf(1), maxWait},
		}
		for _, tc := range tests {
			if got := fromNanos(tc.in); got != tc.want {
				t.Errorf("fromNanos(%v) = %v, want %v", tc.in, got, tc.want)
			}
		}
	})
	t.Run("addSat", func(t *testing.T) {
		tests := []struct{ a, b, want time.Duration }{
			{0, 0, 0}, {1, 2, 3}, {maxWait, 0, maxWait}, {maxWait, 1, maxWait}, {maxWait - 1, 1, maxWait},
			{maxWait / 2, maxWait/2 + 1, maxWait}, {maxWait, maxWait, maxWait},
		}
		for _, tc := range tests {
			if got := addSat(tc.a, tc.b); got != tc.want {
				t.Errorf("addSat(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		}
	})
	t.Run("constructors without arguments", func(t *testing.T) {
		tests := []struct {
			name string
			f    func()
		}{
			{"WaitChain()", func() { WaitChain() }},
			{"WaitFunc(nil)", func() { WaitFunc(nil) }},
			{"WaitBackOff(nil)", func() { WaitBackOff(nil) }},
			{"StopIf(nil)", func() { StopIf(nil) }},
			{"WaitBackOff returning nil", func() {
				WaitBackOff(func() backoff.BackOff { return nil }).Duration(State{Attempt: 1})
			}},
		}
		for _, tc := range tests {
			msg, panicked := catchPanic(tc.f)
			if !panicked || !strings.HasPrefix(msg, "retries:") {
				t.Errorf("%s: panic %q (panicked %v), want a panic starting \"retries:\"", tc.name, msg, panicked)
			}
		}
	})
}
