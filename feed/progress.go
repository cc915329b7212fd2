package feed

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Progress is one progress report of a feed, for Config.ProgressLine.
type Progress struct {
	Elapsed time.Duration // since the feed started
	// Rate is the operations acknowledged per second over about the last
	// second, or over the whole feed in the final report.
	Rate         float64
	Acknowledged int64
	Failed       int64
	InFlight     int64  // requests on the wire
	Requests     int64  // sent, retries included
	Retries      int64  // requests beyond the first of each operation
	Throttled    int64  // 429 responses
	Unavailable  int64  // 503 responses
	Exceptions   int64  // requests that got no response
	Limit        string // the limiter's current limit, or "N (fixed)"
	Paused       bool   // the feed is paused by an outage
	Final        bool   // the report at the end of the feed, on a terminal only
}

// commandLine is the feed command's progress line.
func commandLine(p Progress) string {
	if p.Paused {
		return fmt.Sprintf("feed %5.1fs: paused by an outage, %d acknowledged, %d failed, %d in flight, %d×503, %d without a response",
			p.Elapsed.Seconds(), p.Acknowledged, p.Failed, p.InFlight, p.Unavailable, p.Exceptions)
	}
	return fmt.Sprintf("feed %5.1fs: %6.0f docs/s, %d acknowledged, %d failed, %d in flight, limit %s, %d×429, %d retries",
		p.Elapsed.Seconds(), p.Rate, p.Acknowledged, p.Failed, p.InFlight, p.Limit, p.Throttled, p.Retries)
}

// snapshot returns the feed's counts now, Elapsed and Rate left out.
func (c *Client) snapshot() Progress {
	limit := strconv.Itoa(c.cfg.Concurrency) + " (fixed)"
	if l := c.endpoints[0].limiter; l != nil {
		limit = strconv.FormatFloat(l.Stats().Limit, 'g', 4, 64)
	}
	s := c.Stats()
	return Progress{Paused: s.PausedNow,
		Acknowledged: s.Acknowledged, Failed: s.Failed, InFlight: s.InFlight,
		Requests: s.Requests, Retries: s.Retries, Throttled: s.Throttled,
		Unavailable: s.Unavailable, Exceptions: s.Exceptions, Limit: limit,
	}
}

// Counts returns the feed's final counts, with Elapsed and Rate over the
// whole feed.
func (r Report) Counts() Progress {
	p := r.counts
	p.Elapsed = r.elapsed
	if secs := r.elapsed.Seconds(); secs > 0 {
		p.Rate = float64(p.Acknowledged) / secs
	}
	return p
}

// reportProgress reports the feed's progress every Config.Progress until
// finished is closed.
func (r *run) reportProgress(start time.Time, finished <-chan struct{}) {
	c := r.c
	line, terminal := c.cfg.ProgressLine, c.cfg.Terminal
	switch {
	case c.cfg.ProgressJSON:
		line = func(Progress) string {
			b := r.current(start).summaryLine()
			return string(withKeys(b[:len(b)-1], c.cfg.ProgressKeys))
		}
		terminal = false
	case line == nil:
		line = commandLine
	}
	report(c.progressOut, c.cfg.Progress, terminal, start, c.snapshot, line, finished)
}

// withKeys returns the JSON object obj with the keys keys() gives added at
// its end, in order, those it has already left out.
func withKeys(obj []byte, keys func() map[string]any) []byte {
	if keys == nil {
		return obj
	}
	var have map[string]json.RawMessage
	if json.Unmarshal(obj, &have) != nil || len(obj) < 2 {
		return obj
	}
	extra := keys()
	out := obj[: len(obj)-1 : len(obj)-1] // without its closing brace
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if _, dup := have[k]; dup {
			continue
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(extra[k])
		if err != nil {
			continue
		}
		if len(have) > 0 || len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, kb...), ':'), vb...)
	}
	return append(out, '}')
}

// report writes line(snap()) to w every interval until done is closed: a
// line each time, or, on a terminal, one line rewritten in place and ended
// by a final report with the rate over the whole feed.
func report(w *lockedWriter, interval time.Duration, terminal bool, start time.Time, snap func() Progress, line func(Progress) string, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	// The rate is over about the last second: from the oldest mark kept.
	type mark struct {
		t time.Time
		n int64
	}
	marks := []mark{{start, 0}}
	for {
		final := false
		select {
		case <-t.C:
		case <-done:
			if !terminal {
				return
			}
			final = true
		}
		now := time.Now()
		p := snap()
		for len(marks) > 1 && now.Sub(marks[1].t) >= time.Second {
			marks = marks[1:]
		}
		from := marks[0]
		if final {
			from = mark{start, 0}
		}
		p.Elapsed, p.Final = now.Sub(start), final
		if dt := now.Sub(from.t).Seconds(); dt > 0 {
			p.Rate = float64(p.Acknowledged-from.n) / dt
		}
		marks = append(marks, mark{now, p.Acknowledged})
		switch {
		case final:
			w.printf("\r\033[K%s\n", line(p))
			return
		case terminal:
			w.printf("\r\033[K%s", line(p))
		default:
			w.printf("%s\n", line(p))
		}
	}
}
