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

func TestZZDegraded(t *testing.T) {
	var reqs atomic.Int64
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		reqs.Add(1)
		x := rand.Float64()
		switch {
		case x < 0.4:
			return 503
		case x < 0.5:
			return 500
		}
		return 0
	})
	w, _ := strconv.Atoi(os.Getenv("BW"))
	f, _ := strconv.Atoi(os.Getenv("BF"))
	c, _ := New(Config{URL: srv.URL, BreakerWindow: w, BreakerFailures: f})
	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Second)
	defer cancel()
	var silent, maxSilent int
	go func() {
		var last int64
		for range 16 {
			time.Sleep(time.Second)
			n := reqs.Load()
			if n == last { silent++; maxSilent = max(maxSilent, silent) } else { silent = 0 }
			last = n
		}
	}()
	start := time.Now()
	_ = c.Feed(ctx, Read(strings.NewReader(puts(400000))), nil)
	r := c.Report()
	t.Logf("BW=%d BF=%d: %.0f acked/s, %.0f ops ended/s, %d requests, breaker opened %d, longest silence %ds, budget refusals %d",
		w, f, float64(r.ok)/time.Since(start).Seconds(), float64(r.ok+r.failed)/time.Since(start).Seconds(), reqs.Load(), r.Breaker.Stats().Opened, maxSilent, r.refusals)
}
