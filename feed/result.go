package feed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
)

// Summary returns the feed's summary as JSON, with the keys of Vespa's
// `vespa feed` first and this command's own under "retries.", one key a
// line.
func (r Report) Summary() []byte { return r.format(true) }

// summaryLine returns the summary on one line, ending in a newline.
func (r Report) summaryLine() []byte { return r.format(false) }

// format writes the summary's keys in order, one a line when pretty.
func (r Report) format(pretty bool) []byte {
	secs := r.elapsed.Seconds()
	per := func(n int64) float64 {
		if secs <= 0 {
			return 0
		}
		return round3(float64(n) / secs)
	}
	lo, avg, hi, codes := r.wire.latency()
	codeCounts := map[string]int64{}
	for c, n := range codes {
		codeCounts[strconv.Itoa(c)] = n
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	reqBytes, respBytes := r.wire.requestBytes.Load(), r.wire.responseBytes.Load()
	unsent := make([]string, len(r.unsent))
	for i, op := range r.unsent {
		unsent[i] = op.id
	}
	kv := []struct {
		k string
		v any
	}{
		{"feeder.operation.count", r.operations},
		{"feeder.seconds", round3(secs)},
		{"feeder.ok.count", r.ok},
		{"feeder.ok.rate", per(r.ok)},
		{"feeder.error.count", r.failed},
		{"feeder.inflight.count", r.inFlight},
		{"http.request.count", r.wire.requests.Load()},
		{"http.request.bytes", reqBytes},
		{"http.request.MBps", round3(float64(per(reqBytes)) / 1e6)},
		{"http.exception.count", r.wire.exceptions.Load()},
		{"http.response.count", r.wire.responses.Load()},
		{"http.response.bytes", respBytes},
		{"http.response.MBps", round3(float64(per(respBytes)) / 1e6)},
		{"http.response.error.count", r.wire.responseErrors.Load()},
		{"http.response.latency.millis.min", ms(lo)},
		{"http.response.latency.millis.avg", ms(avg)},
		{"http.response.latency.millis.max", ms(hi)},
		{"http.response.code.counts", codeCounts},
		{"retries.retry.count", r.wire.retries.Load()},
		{"retries.badinput.count", r.badInput},
		{"retries.unsent.count", len(r.unsent)},
		{"retries.unsent.ids", unsent},
		{"retries.heldback.count", r.heldBack},
		{"retries.unknown.count", r.unknown},
		{"retries.unread.line", r.unread.line},
		{"retries.unread.offset", r.unread.off},
		{"retries.conditionnotmet.count", r.condFailed},
		{"retries.remove.notfound.count", r.notFound},
		{"retries.limiter", limiterJSON(r.Limiter)},
		{"retries.budget", budgetJSON(r.Budget, r.refusals)},
		{"retries.breaker", r.breakerJSON()},
		{"retries.maxoutage.exceeded", r.OutageExceeded()},
		{"retries.failedfile.count", r.writtenJSON()},
		{"retries.endpoints", r.endpoints},
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range kv {
		v, _ := json.Marshal(e.v)
		if pretty {
			b.WriteString("\n  ")
		}
		fmt.Fprintf(&b, "%q:", e.k)
		if pretty {
			b.WriteByte(' ')
		}
		b.Write(v)
		if i < len(kv)-1 {
			b.WriteByte(',')
		}
	}
	if pretty {
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// Files returns what the feed wrote for the user to look at: the
// operations written to Config.Failed and to Config.Unknown, and the bytes
// of unread input written to Config.Unread.
func (r Report) Files() (failed, unknown, unreadBytes int64) {
	return r.written, r.unknownOut, r.unreadBytes
}

// shortfall says, on one line, what of the input was not acknowledged, or
// "" if all of it was.
func (r Report) shortfall() string {
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	failed := r.failed - r.badInput - int64(len(r.unsent)) - r.heldBack - r.unknown
	add(failed, "failed")
	add(r.unknown, "failed with an unknown outcome (they may have been applied)")
	add(r.heldBack, "held back behind a failed one")
	if r.resumable {
		add(int64(len(r.unsent)), "not sent (left to the resumed feed)")
	} else {
		add(int64(len(r.unsent)), "not sent")
	}
	add(r.badInput, "malformed (not sent, not written)")
	if r.unread.line > 0 {
		parts = append(parts, r.unreadText()+" not read")
	}
	return strings.Join(parts, ", ")
}

// unreadText names the input not read: "the input from line 5 on", or,
// for operations without input lines (an iterator's), "the rest of the
// input", as the subject of "was not read" or before "not read".
func (r Report) unreadText() string {
	if r.lineless {
		return "the rest of the input"
	}
	return fmt.Sprintf("the input from %v on", r.unread)
}

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}

// limiterJSON is the limiter's final state, or nil for a fixed concurrency.
func limiterJSON(l *retries.Limiter) any {
	if l == nil {
		return nil
	}
	s := l.Stats()
	return map[string]any{
		"limit": round3(s.Limit), "rate": round3(s.Rate), "inflight": s.InFlight, "waiting": s.Waiting,
		"successes": s.Successes, "throttles": s.Throttles, "failures": s.Failures,
	}
}

// budgetJSON is the budget's state over its last 10 s, and the retries it
// refused over the whole feed.
func budgetJSON(b *retries.Budget, refusals int64) any {
	if b == nil {
		return nil
	}
	s := b.Stats()
	return map[string]any{
		"ratio": s.Ratio, "minpersecond": s.MinPerSecond, "refused": refusals,
		"window.seconds": 10, "window.deposits": s.Deposits, "window.retries": s.Retries,
		"window.refusals": s.Refusals, "window.available": s.Available,
	}
}

// breakerJSON is the breaker's final state and what the outages cost:
// how often the feed paused, and for how long.
func (r Report) breakerJSON() any {
	if r.Breaker == nil {
		return nil
	}
	s := r.Breaker.Stats()
	return map[string]any{
		"state": s.State.String(), "opened": s.Opened, "probes": s.Probes, "outage.failures": s.OutageFailures,
		"paused.count": r.pauses, "paused.seconds": round3(r.paused.Seconds()),
	}
}

// writtenJSON is the count of operations written to Config.Failed, or nil
// without it.
func (r Report) writtenJSON() any {
	if !r.hasFailedFile {
		return nil
	}
	return r.written
}
