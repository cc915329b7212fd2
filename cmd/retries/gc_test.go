package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the command runs its collector at defaultGCPercent unless
// GOGC is set, which then stands. (Not parallel: the setting is the
// process's.)
func TestTuneGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC: the collector's target is %d, want %d", got, defaultGCPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: the target was changed to %d", got)
	}
}
