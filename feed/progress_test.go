package feed

import (
	"bytes"
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
