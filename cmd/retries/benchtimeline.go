package main

import (
	"slices"
	"time"
)

// second is one second of a bench run's timeline: the queries due in it,
// how they ended, and their latencies from the due time.
type second struct {
	sent, ok, degraded, failed int64
	latency                    []time.Duration
}

// tally counts a query due at due in its second: ok, degraded (answered
// in time but incomplete) or failed. r.mu is held.
func (r *benchReport) tally(due time.Time, ok, answered bool, latency time.Duration) {
	i := max(0, int(due.Sub(r.start)/time.Second))
	for len(r.timeline) <= i {
		r.timeline = append(r.timeline, second{})
	}
	s := &r.timeline[i]
	s.sent++
	switch {
	case ok:
		s.ok++
	case answered:
		s.degraded++
	default:
		s.failed++
	}
	s.latency = append(s.latency, latency)
}

// timelineJSON is the timeline as -json writes it: one entry a second, t
// its start from the run's (in seconds).
func (r *benchReport) timelineJSON() []map[string]any {
	out := make([]map[string]any, 0, len(r.timeline))
	for i, s := range r.timeline {
		lat := slices.Clone(s.latency)
		out = append(out, map[string]any{"t": i, "sent": s.sent, "ok": s.ok, "degraded": s.degraded, "failed": s.failed,
			"p50_ms": ms(quantile(lat, 0.5)), "p99_ms": ms(quantile(lat, 0.99)), "p999_ms": ms(quantile(lat, 0.999))})
	}
	return out
}
