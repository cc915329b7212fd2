package feed

import (
	"testing"
	"time"
)

// TestDefaults: a zero field is the command's default, a negative
// duration none; the attempt timeout outlasts a longer ServerTimeout.
func TestDefaults(t *testing.T) {
	t.Parallel()
	c := withDefaults(Config{})
	if c.Timeout != 2*time.Minute || c.AttemptTimeout != 30*time.Second || c.Grace != 5*time.Second ||
		c.MaxOutage != 5*time.Minute || c.FirstResponse != 30*time.Second || c.MaxInFlight != 256 || c.Budget == nil {
		t.Errorf("withDefaults(Config{}) = %+v", c)
	}
	if isZero(c.Outer) || isZero(c.Inner) || c.Outer.String() != DefaultOuter.String() || c.Inner.String() != DefaultInner.String() {
		t.Errorf("layers %v, %v; want DefaultOuter, DefaultInner", c.Outer, c.Inner)
	}
	off := withDefaults(Config{Timeout: -1, Grace: -1, MaxOutage: -1, FirstResponse: -1, AttemptTimeout: -1, NoBudget: true})
	if off.Timeout != 0 || off.Grace != 0 || off.MaxOutage != 0 || off.FirstResponse != 0 || off.AttemptTimeout != 0 || off.Budget != nil {
		t.Errorf("negative durations and NoBudget: %+v, want all off", off)
	}
	for server, want := range map[time.Duration]time.Duration{
		0: 30 * time.Second, 5 * time.Second: 30 * time.Second, time.Minute: 67 * time.Second,
	} {
		if got := withDefaults(Config{ServerTimeout: server}).AttemptTimeout; got != want {
			t.Errorf("ServerTimeout %v: AttemptTimeout %v, want %v", server, got, want)
		}
	}
}
