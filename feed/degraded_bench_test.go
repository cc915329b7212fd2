package feed

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// BenchmarkHalfFailingServer feeds b.N puts with the command's defaults to
// a server that answers 40 % of requests 503 and 10 % 500, and reports the
// operations acknowledged and ended per second, the breaker's openings,
// and the longest run of whole seconds without a request. docs/feed.md
// quotes it, with
//
//	go test -run '^$' -bench HalfFailingServer -benchtime 150000x ./feed
//
// The environment variable BREAKER_FAILURES sets Config.BreakerFailures.
func BenchmarkHalfFailingServer(b *testing.B) {
	var reqs atomic.Int64
	srv := feedtest.New(b, func(*http.Request, int) int {
		reqs.Add(1)
		switch x := rand.Float64(); {
		case x < 0.4:
			return http.StatusServiceUnavailable
		case x < 0.5:
			return http.StatusInternalServerError
		}
		return 0
	})
	cfg := Config{URL: srv.URL}
	cfg.BreakerFailures, _ = strconv.Atoi(os.Getenv("BREAKER_FAILURES"))
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	input := puts(b.N)
	finished := make(chan struct{})
	var silent atomic.Int64 // the longest run of seconds without a request
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, run := int64(0), int64(0)
		for {
			select {
			case <-finished:
				return
			case <-t.C:
			}
			if n := reqs.Load(); n == last {
				run++
				silent.Store(max(silent.Load(), run))
			} else {
				last, run = n, 0
			}
		}
	}()
	b.ResetTimer()
	start := time.Now()
	_ = c.Feed(context.Background(), Read(strings.NewReader(input)), nil)
	secs := time.Since(start).Seconds()
	close(finished)
	r := c.Report()
	b.ReportMetric(float64(r.ok)/secs, "acked/s")
	b.ReportMetric(float64(r.ok+r.failed)/secs, "ended/s")
	b.ReportMetric(float64(r.Breaker.Stats().Opened), "openings")
	b.ReportMetric(float64(silent.Load()), "silent-s")
}
