package retries_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestLimiterBatchesPacedGrants: while the rate limit binds far below the
// in-flight limit, as against a rate limiter at the server, the calls
// waiting for it go out a few at a time on one wakeup rather than one a
// wakeup (each costs a sleeping machine tens of microseconds), and the
// server's rate is still met with little backpressure.
func TestLimiterBatchesPacedGrants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate     float64
		minBatch float64
	}{
		{500, 2},
		{1000, 3},
		{2000, 5},
	} {
		t.Run(fmt.Sprint(tc.rate), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{})
				r := drive(t, l, newRateServer(tc.rate, 20, time.Millisecond), 64, 20, nil)
				perSecond, throttled := r.share(5, 20)
				batch := r.grantsPerWakeup()
				t.Logf("%.0f/s, backpressure %.2f%%, %.2f permits per wakeup", perSecond, 100*throttled, batch)
				if perSecond < 0.97*tc.rate || throttled > 0.04 || batch < tc.minBatch {
					r.log(t)
					t.Errorf("%.0f/s, backpressure %.2f%%, %.2f permits per wakeup; want ≥ %.0f/s, ≤ 4%%, ≥ %g",
						perSecond, 100*throttled, batch, 0.97*tc.rate, tc.minBatch)
				}
			})
		})
	}
}
