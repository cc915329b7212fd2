package retries

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestGoldenDraws checks golden waits with the uniform draw fixed, as
// pyvespa's test_wait_golden_jitter_matches_legacy_formula patches
// random.uniform: the waits are exact to the microsecond.
func TestGoldenDraws(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 100 * time.Millisecond},          // pyvespa's test
		{4, 0, 423580103 * time.Nanosecond},     // pyvespa's test: 0.1 × 1.618³ s
		{1, 1, 1100 * time.Millisecond},         // the largest draw
		{1, 0.5, 600 * time.Millisecond},        // 429, 429, 200 at u=0.5: first sleep
		{2, 0.5, 661800000 * time.Nanosecond},   // and second sleep
		{11, 0, 12296604 * time.Microsecond},    // 0.1 × 1.618^10 s
		{11, 0.25, 12546604 * time.Microsecond}, // plus a quarter second
	} {
		if got := (golden{}).at(tc.n, tc.u); absDur(got-tc.want) > time.Microsecond {
			t.Errorf("golden wait after attempt %d with u=%g = %v, want %v", tc.n, tc.u, got, tc.want)
		}
	}
}

// TestRandomExponentialDraws checks full jitter at both ends and the middle
// of the draw, for Throttle's parameters.
func TestRandomExponentialDraws(t *testing.T) {
	t.Parallel()
	w := randExpo{e: Exponential{Multiplier: time.Second, Max: 10 * time.Second}.norm("test")}
	for _, tc := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 0}, {1, 1, time.Second}, {1, 0.5, 500 * time.Millisecond},
		{4, 0.5, 4 * time.Second}, {5, 0.5, 5 * time.Second}, {64, 1, 10 * time.Second}, {1 << 40, 0.3, 3 * time.Second},
	} {
		if got := w.at(tc.n, tc.u); got != tc.want {
			t.Errorf("Throttle wait after attempt %d with u=%g = %v, want %v", tc.n, tc.u, got, tc.want)
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// stopWait stands for a wait that asks the policy to give up, in tests that
// compare single durations.
const stopWait time.Duration = -1

// nextOrStop returns w's next wait for s, or stopWait when w asks to give up.
func (w Wait) nextOrStop(s State) time.Duration {
	d, stop := w.next(s)
	if stop {
		return stopWait
	}
	return d
}

// asError is an error whose As method sets a *StatusError.
type asError struct{ code int }

func (e asError) Error() string { return "as" }
func (e asError) As(target any) bool {
	if p, ok := target.(**StatusError); ok {
		*p = &StatusError{StatusCode: e.code}
		return true
	}
	return false
}

// loopError unwraps to itself.
type loopError struct{}

func (e *loopError) Error() string { return "loop" }
func (e *loopError) Unwrap() error { return e }

// TestStatusOfErrors: statusOf finds a *StatusError where errors.As does,
// through %w, errors.Join and an As method, and stops on a cycle.
func TestStatusOfErrors(t *testing.T) {
	se := &StatusError{StatusCode: 503}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"direct", se, 503},
		{"wrapped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", se)), 503},
		{"joined", errors.Join(errors.New("x"), fmt.Errorf("c: %w", se)), 503},
		{"as_method", fmt.Errorf("d: %w", asError{429}), 429},
		{"none", errors.New("plain"), 0},
		{"cycle", &loopError{}, 0},
	} {
		code, ok := statusOf(nil, tc.err)
		if code != tc.want || ok != (tc.want != 0) {
			t.Errorf("%s: statusOf = %d, %v; want %d", tc.name, code, ok, tc.want)
		}
		var target *StatusError
		if tc.name != "cycle" && errors.As(tc.err, &target) != ok {
			t.Errorf("%s: errors.As disagrees", tc.name)
		}
	}
	err := fmt.Errorf("e: %w", se)
	if n := testing.AllocsPerRun(100, func() { statusOf(nil, err) }); n != 0 {
		t.Errorf("statusOf allocates %v times, want 0", n)
	}
}
