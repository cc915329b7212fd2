package query

import (
	"math"
	"slices"
	"time"
)

const (
	// ewmaWeight is the weight of the newest round trip in the average:
	// small, so that a tail (a few queries held long) moves it little, and
	// only a container slow on the whole is avoided, after minRoundTrips.
	ewmaWeight    = 0.02
	minRoundTrips = 10
	// An endpoint whose average round trip is slowFactor times the
	// endpoints' median, and slowMargin more, is avoided for ejectFor,
	// then tried again from scratch: a slow container, a bad load
	// balancer target, a node in a long GC.
	slowFactor = 3
	slowMargin = 5 * time.Millisecond
	ejectFor   = 5 * time.Second
)

// avoided reports whether endpoint i is avoided at now (UnixNano).
func (c *Client) avoided(i int, now int64) bool { return c.eps[i].avoid.Load() > now }

// avoidFor avoids endpoint i for d from now.
func (c *Client) avoidFor(i int, d time.Duration) {
	c.eps[i].avoid.Store(time.Now().Add(d).UnixNano())
}

// roundTrip notes a round trip of endpoint i that brought a result, and
// avoids it for ejectFor if it has become much slower than the others,
// while another endpoint is there to take its queries. It is tried again
// from scratch after that: its first answers make its average anew.
func (c *Client) roundTrip(i int, d time.Duration) {
	h := c.eps[i]
	for {
		old := h.ewma.Load()
		v := d.Seconds()
		if old != 0 {
			v = (1-ewmaWeight)*math.Float64frombits(old) + ewmaWeight*v
		}
		if h.ewma.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
	if h.n.Add(1) < minRoundTrips || len(c.eps) < 2 {
		return
	}
	var avgs []float64
	now, others := time.Now().UnixNano(), 0
	for j, e := range c.eps {
		if v := e.ewma.Load(); v != 0 {
			avgs = append(avgs, math.Float64frombits(v))
		}
		if j != i && !c.avoided(j, now) {
			others++
		}
	}
	if len(avgs) < 2 || others == 0 {
		return
	}
	slices.Sort(avgs)
	median := avgs[(len(avgs)-1)/2]
	mine := math.Float64frombits(h.ewma.Load())
	if mine > slowFactor*median && mine-median > slowMargin.Seconds() {
		c.avoidFor(i, ejectFor)
		h.ewma.Store(0)
		h.n.Store(0)
		c.stats.ejected.Add(1)
	}
}
