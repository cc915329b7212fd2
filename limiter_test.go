package retries_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

func TestLimiterExplore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srv     func() server
		cap     float64
		changes func(s server) map[int]func()
	}{
		{"rate_500", func() server { return newRateServer(500, 20, time.Millisecond) }, 500, nil},
		{"rate_1500", func() server { return newRateServer(1500, 20, time.Millisecond) }, 1500, nil},
		{"queue_12x8ms", func() server {
			return &slotServer{k: 12, queue: 24, service: 8 * time.Millisecond, net: time.Millisecond}
		}, 1500, nil},
		{"wall_12x8ms", func() server { return &slotServer{k: 12, service: 8 * time.Millisecond, net: time.Millisecond} }, 1500, nil},
		{"wall_16x10ms", func() server { return &slotServer{k: 16, service: 10 * time.Millisecond, net: time.Millisecond} }, 1600, nil},
		{"rate_double_halve", func() server { return newRateServer(500, 20, time.Millisecond) }, 500, func(s server) map[int]func() {
			return map[int]func(){10: func() { s.(*rateServer).setRate(1000) }, 20: func() { s.(*rateServer).setRate(500) }}
		}},
		{"wall_double_halve", func() server { return &slotServer{k: 12, service: 8 * time.Millisecond, net: time.Millisecond} }, 1500, func(s server) map[int]func() {
			return map[int]func(){10: func() { s.(*slotServer).setSlots(24) }, 20: func() { s.(*slotServer).setSlots(12) }}
		}},
		{"queue_double_halve", func() server {
			return &slotServer{k: 12, queue: 24, service: 8 * time.Millisecond, net: time.Millisecond}
		}, 1500, func(s server) map[int]func() {
			return map[int]func(){10: func() { s.(*slotServer).setSlots(24) }, 20: func() { s.(*slotServer).setSlots(12) }}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := retries.NewLimiter(retries.LimiterConfig{})
				s := tc.srv()
				var ch map[int]func()
				if tc.changes != nil {
					ch = tc.changes(s)
				}
				r := drive(t, l, s, 64, 30, ch)
				r.log(t)
				ps, sh := r.share(5, 10)
				t.Logf("5-10s: %.0f/s (%.3f of capacity), backpressure %.2f%%, max wait %v", ps, ps/tc.cap, 100*sh, r.maxWait)
				t.Log(l)
			})
		})
	}
}
