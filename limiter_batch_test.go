package retries_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestLimiterBatchesPacedGrants: while the rate limit binds far below the
// in-flight limit, as against a rate limiter at the server that answers in
// 1 ms, the calls waiting for it go out a few at a time on one wakeup
// rather than one a wakeup (each costs a sleeping machine tens of
// microseconds): up to 3.5 ms of tokens, so 3 at 1000/s and 7 at 2000/s,
// and one by one at 500/s, where fewer than 2 tokens come in 3.5 ms. The
// server's rate is met with little backpressure either way.
func TestLimiterBatchesPacedGrants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate               float64
		minBatch, maxBatch float64 // permits per wakeup
	}{
		{500, 1, 1.05},
		{1000, 2.5, 3},
		{2000, 5, 7},
	} {
		t.Run(fmt.Sprint(tc.rate), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{})
				r := drive(t, l, newRateServer(tc.rate, 20, time.Millisecond), 64, 20, nil)
				perSecond, throttled := r.share(5, 20)
				batch := r.grantsPerWakeup()
				if perSecond < 0.97*tc.rate || throttled > 0.04 || batch < tc.minBatch || batch > tc.maxBatch {
					r.log(t)
					t.Errorf("%.0f/s, backpressure %.2f%%, %.2f permits per wakeup; want ≥ %.0f/s, ≤ 4%%, %g to %g",
						perSecond, 100*throttled, batch, 0.97*tc.rate, tc.minBatch, tc.maxBatch)
				}
			})
		})
	}
}
