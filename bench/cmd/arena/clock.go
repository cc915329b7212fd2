package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// phase is a step of the capacity: from at after the start on, f times the
// nominal.
type phase struct {
	at time.Duration
	f  float64
}

// parsePhases parses AT:F,…; "" is none.
func parsePhases(s string) ([]phase, error) {
	if s == "" {
		return nil, nil
	}
	var out []phase
	for _, p := range strings.Split(s, ",") {
		a, f, ok := strings.Cut(p, ":")
		at, err := time.ParseDuration(a)
		fv, ferr := strconv.ParseFloat(f, 64)
		if !ok || err != nil || ferr != nil || at < 0 || fv <= 0 {
			return nil, fmt.Errorf("-phases %q: want AT:F,…, such as 5s:0.5,10s:1.5", s)
		}
		out = append(out, phase{at, fv})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out, nil
}

// factorAt is the capacity's factor at t after the start.
func factorAt(phases []phase, t time.Duration) float64 {
	f := 1.0
	for _, p := range phases {
		if p.at <= t {
			f = p.f
		}
	}
	return f
}

// runClock is the run's time: since the feeders started, and the
// capacity's factor then.
type runClock struct {
	started *atomic.Int64 // UnixNano; 0 before the start
	phases  []phase
}

// since is the time since the start, 0 before it.
func (k *runClock) since() time.Duration {
	s := k.started.Load()
	if s == 0 {
		return 0
	}
	return time.Since(time.Unix(0, s))
}

// factor is the capacity's factor now.
func (k *runClock) factor() float64 { return factorAt(k.phases, k.since()) }

// within says whether now lies in [at, at+dur) after the start, never
// before it.
func (k *runClock) within(at, dur time.Duration) func() bool {
	return func() bool {
		since := k.since()
		return k.started.Load() != 0 && dur > 0 && since >= at && since < at+dur
	}
}
