package feed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestReport checks when progress is written and the rate it reports: a
// line a tick, the rate over about the last second, and on a terminal one
// line rewritten and ended by a final report over the whole feed.
func TestReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		terminal bool
		want     string
	}{
		// Two ticks, then the end: lines for the ticks only.
		{"plain", false, "1.0s 4 4/s\n2.0s 7 3/s\n"},
		{"terminal", true, "\r\033[K1.0s 4 4/s\r\033[K2.0s 7 3/s\r\033[K2.5s 10 4/s final\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var (
					out  bytes.Buffer
					n    atomic.Int64
					done = make(chan struct{})
					wg   sync.WaitGroup
				)
				snap := func() Progress { return Progress{Acknowledged: n.Load()} }
				line := func(p Progress) string {
					s := fmt.Sprintf("%.1fs %d %.0f/s", p.Elapsed.Seconds(), p.Acknowledged, p.Rate)
					if p.Final {
						s += " final"
					}
					return s
				}
				wg.Go(func() { report(&lockedWriter{w: &out}, time.Second, tc.terminal, time.Now(), snap, line, done) })
				n.Store(4)
				time.Sleep(1500 * time.Millisecond)
				n.Store(7)
				time.Sleep(time.Second)
				n.Store(10)
				close(done)
				wg.Wait()
				if got := out.String(); got != tc.want {
					t.Errorf("progress output = %q, want %q", got, tc.want)
				}
			})
		})
	}
}

// TestWithKeys: ProgressKeys adds its keys to a JSON report, in order,
// after the summary's, leaving a key the summary has as it is; the line
// stays one JSON object.
func TestWithKeys(t *testing.T) {
	t.Parallel()
	keys := func() map[string]any { return map[string]any{"b.x": 2, "a.x": "s", "feeder.ok.count": 99} }
	for obj, want := range map[string]string{
		`{"feeder.ok.count":1}`: `{"feeder.ok.count":1,"a.x":"s","b.x":2}`,
		`{}`:                    `{"a.x":"s","b.x":2,"feeder.ok.count":99}`,
	} {
		got := withKeys([]byte(obj), keys)
		if string(got) != want || !json.Valid(got) {
			t.Errorf("withKeys(%s) = %s, want %s", obj, got, want)
		}
	}
	if got := withKeys([]byte(`{"a":1}`), nil); string(got) != `{"a":1}` {
		t.Errorf("without keys: %s", got)
	}
}
