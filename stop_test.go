package retries_test

import (
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

func rs(n int, elapsed, wait float64) retries.State {
	return retries.State{Attempt: n, Elapsed: secs(elapsed), Wait: secs(wait)}
}

// TestStops checks each stop against tenacity's stop vectors, named in a
// comment above each, and the empty StopAny and StopAll.
func TestStops(t *testing.T) {
	t.Parallel()
	anyStop := retries.StopAny(retries.StopAfterDelay(time.Second), retries.StopAfterAttempt(4))
	allStop := retries.StopAll(retries.StopAfterDelay(time.Second), retries.StopAfterAttempt(4))
	six := []retries.State{rs(1, 0.1, 0), rs(2, 0.2, 0), rs(2, 0.8, 0), rs(4, 0.8, 0), rs(3, 1.8, 0), rs(4, 1.8, 0)}
	for _, tc := range []struct {
		name   string
		s      retries.Stop
		states []retries.State
		want   []bool
	}{
		// tenacity test_stop_after_attempt
		{"after_attempt", retries.StopAfterAttempt(3), []retries.State{rs(2, 6546, 0), rs(3, 6546, 0), rs(4, 6546, 0)}, []bool{false, true, true}},
		{"after_attempt_0_is_1", retries.StopAfterAttempt(0), []retries.State{rs(1, 0, 0)}, []bool{true}},
		// tenacity test_stop_after_delay
		{"after_delay", retries.StopAfterDelay(time.Second), []retries.State{rs(2, 0.999, 0), rs(2, 1, 0), rs(2, 1.001, 0)}, []bool{false, true, true}},
		// tenacity test_stop_before_delay
		{"before_delay", retries.StopBeforeDelay(time.Second),
			[]retries.State{rs(2, 0.999, 0.0001), rs(2, 1, 0.001), rs(2, 1, 1), rs(2, 0.999, 0), rs(2, 1, 0), rs(2, 1.001, 0)},
			[]bool{false, true, true, false, true, true}},
		{"before_delay_saturates", retries.StopBeforeDelay(time.Second), []retries.State{{Attempt: 2, Elapsed: time.Second / 2, Wait: maxDuration}}, []bool{true}},
		// tenacity test_stop_any, test_stop_or
		{"any", anyStop, six, []bool{false, false, false, true, true, true}},
		// tenacity test_stop_all, test_stop_and
		{"all", allStop, six, []bool{false, false, false, false, false, true}},
		// tenacity test_never_stop
		{"never", retries.StopNever(), []retries.State{rs(3, 6546, 0), rs(1<<40, 1e9, 0)}, []bool{false, false}},
		{"any_empty_never_stops", retries.StopAny(), []retries.State{rs(1, 0, 0), rs(100, 100, 0)}, []bool{false, false}},
		{"all_empty_stops", retries.StopAll(), []retries.State{rs(1, 0, 0)}, []bool{true}},
		{"zero_stop_stops", retries.Stop{}, []retries.State{rs(1, 0, 0)}, []bool{true}},
		{"if", retries.StopIf(func(s retries.State) bool { return s.Err != nil }),
			[]retries.State{{Attempt: 1}, {Attempt: 1, Err: errBoom}}, []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, st := range tc.states {
				if got := tc.s.Check(st); got != tc.want[i] {
					t.Errorf("Check(%+v) = %v, want %v", st, got, tc.want[i])
				}
			}
		})
	}
}

func TestStopString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    retries.Stop
		want string
	}{
		{retries.StopAfterAttempt(3), "StopAfterAttempt(3)"},
		{retries.StopAfterDelay(90 * time.Second), "StopAfterDelay(1m30s)"},
		{retries.StopBeforeDelay(time.Second), "StopBeforeDelay(1s)"},
		{retries.StopNever(), "StopNever()"},
		{retries.StopAny(retries.StopAfterAttempt(2), retries.StopNever()), "StopAny(StopAfterAttempt(2), StopNever())"},
		{retries.StopAll(), "StopAll()"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// TestStopsCompare checks that simple stops compare with == and that
// combined ones can be compared without a panic.
func TestStopsCompare(t *testing.T) {
	t.Parallel()
	if retries.StopAfterAttempt(3) != retries.StopAfterAttempt(3) || retries.StopAfterAttempt(3) == retries.StopAfterAttempt(4) {
		t.Error("StopAfterAttempt values do not compare by their argument")
	}
	a := retries.StopAny(retries.StopNever())
	same := a
	if a != same || a == retries.StopAny(retries.StopNever()) {
		t.Error("a combined stop should equal itself only")
	}
}
