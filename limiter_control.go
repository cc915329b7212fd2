package retries

import (
	"math"
	"time"
)

// control is a Limiter's control law: an in-flight limit and a rate limit
// (a token bucket), both learned from what released permits report. Every
// method runs with the Limiter's lock held; times are nanoseconds since the
// Limiter was made.
//
// The law, in short:
//   - Slow start: the in-flight limit starts at initialLimit and grows by
//     one per success granted at the limit (it doubles every round trip
//     while it binds) until the first backpressure, which cuts it to
//     limitCut × the count then in flight, or a rise in latency.
//   - Rate: off until the first backpressure, which turns it on at 0.9 ×
//     the admitted rate. Each later backpressure for an attempt sent since
//     the last cut (so at most one cut per round trip) cuts it by rateCut,
//     more while the share of backpressure is high; each success granted
//     while the rate binds raises it by rateGrow × accel, plus rateProbe ×
//     (accel−1) per second, where accel = 1 + (seconds since the last
//     congestion signal)², up to 101. So about rateGrow/(rateGrow+rateCut)
//     ≈ 2 % of attempts meet backpressure at equilibrium, with a sawtooth
//     of a few %, and a rate cut to its floor recovers in seconds.
//   - Latency: smoothed latency above congestedRatio × its baseline plus
//     latencySlack holds growth of both limits; above queuedRatio × (plus
//     twice the slack) the in-flight limit shrinks, by half an attempt per
//     round trip, down to what the admitted rate needs at the baseline. The
//     baseline is the minimum latency seen, drifting up towards the
//     smoothed latency with a time constant of baseDrift, so that it cannot
//     stick low after the server's latency really changed.
//   - Wall: a share of backpressure that steps up at some count in flight
//     (see wall) caps the in-flight limit half an attempt below it, and
//     backpressure at or above the wall does not cut the rate.
//   - Growth: the in-flight limit grows by limitGrow/limit × accel per
//     success granted at the limit, while latency is normal; the rate is
//     capped at twice the admitted rate. Neither grows while it does not
//     bind, so an idle Limiter does not run away.
type control struct {
	limit, maxLimit float64
	slowStart       bool

	rate, minRate float64 // attempts per second; rate 0 means no rate limit
	tokens        float64
	tokAt         int64

	srtt, base float64 // nanoseconds
	baseAt     int64
	samples    int

	est        float64 // attempts admitted per second, smoothed
	estAt      int64
	estTotal   int64 // admitted attempts counted at estAt
	total      int64 // admitted attempts so far
	estFrom    int64
	estKnown   bool
	estStarted bool

	wall      wall
	wallAt    int // the wall's in-flight count, 0 if none
	wallCheck int // successes until the wall is looked at again

	lastCong, lastRateCut, lastGrow int64
	share                           float64 // smoothed share of backpressure
}

const (
	initialLimit   = 4
	minLimit       = 1
	limitGrow      = 0.25   // per round trip, while the in-flight limit binds
	limitCut       = 0.9    // the in-flight limit on leaving slow start, × the count in flight
	rateGrow       = 0.0004 // per success, while the rate binds
	rateCut        = 0.02   // per backpressure
	rateProbe      = 0.05   // extra growth per second, so a low rate recovers
	rateBurst      = 5 * time.Millisecond
	congestedRatio = 1.5              // smoothed latency over baseline: hold growth
	queuedRatio    = 2.0              // smoothed latency over baseline: shrink
	latencySlack   = time.Millisecond // and over baseline by this much (2× for shrink), so that jitter below a millisecond is not a queue
	baseDrift      = 30 * time.Second
	estBucket      = 50 * time.Millisecond
	estWindow      = 250 * time.Millisecond
	minSamples     = 16
)

func (c *control) init(cfg LimiterConfig) {
	c.maxLimit = float64(cfg.MaxInFlight)
	c.limit = min(initialLimit, c.maxLimit)
	c.slowStart = true
	c.minRate = cfg.MinRate
}

// cap returns the in-flight limit as a count.
func (c *control) cap() int { return max(1, int(c.limit)) }

// tokensAt refills the bucket up to now and returns its tokens; without a
// rate limit there is always a token.
func (c *control) tokensAt(now int64) float64 {
	if c.rate == 0 {
		return math.Inf(1)
	}
	if dt := now - c.tokAt; dt > 0 {
		c.tokens = min(c.burst(), c.tokens+c.rate*float64(dt)/1e9)
		c.tokAt = now
	}
	return c.tokens
}

// burst is the bucket's size: the tokens of rateBurst, at least one.
func (c *control) burst() float64 { return max(1, c.rate*rateBurst.Seconds()) }

// take spends a token and reports whether the bucket was less than full:
// calls are drawing on it as fast as it fills, so the rate binds.
func (c *control) take() bool {
	if c.rate == 0 {
		return false
	}
	bound := c.tokens < c.burst()-0.5
	c.tokens--
	return bound
}

func (c *control) refund() {
	if c.rate > 0 {
		c.tokens = min(c.burst(), c.tokens+1)
	}
}

// untilToken returns the nanoseconds until the bucket holds a token.
func (c *control) untilToken(now int64) int64 {
	if c.rate == 0 {
		return 0
	}
	need := 1 - c.tokensAt(now)
	if need <= 0 {
		return 0
	}
	return int64(math.Ceil(need/c.rate*1e9)) + 1
}

// admitted records total, the attempts the server has admitted so far, at
// now, and keeps the smoothed admitted rate.
func (c *control) admitted(now, total int64) {
	c.total = total
	if !c.estStarted {
		c.estStarted, c.estAt, c.estFrom, c.estTotal = true, now, now, total
		return
	}
	dt := now - c.estAt
	if dt < int64(estBucket) {
		return
	}
	inst := float64(total-c.estTotal) / (float64(dt) / 1e9)
	if !c.estKnown {
		c.est, c.estKnown = inst, true
	} else {
		a := float64(dt) / float64(dt+int64(estWindow))
		c.est += a * (inst - c.est)
	}
	c.estAt, c.estTotal = now, total
}

// admittedRate returns the smoothed admitted rate, or the rate since the
// first admission while no bucket has completed.
func (c *control) admittedRate(now int64) float64 {
	if c.estKnown {
		return c.est
	}
	if c.estStarted && now-c.estFrom > int64(time.Millisecond) {
		return float64(c.total-c.estTotal) / (float64(now-c.estFrom) / 1e9)
	}
	return 0
}

// observe takes a latency sample of a successful attempt.
func (c *control) observe(lat float64, now int64) {
	lat = max(lat, 1)
	c.samples++
	if c.srtt == 0 {
		c.srtt, c.base, c.baseAt = lat, lat, now
		return
	}
	c.srtt += (lat - c.srtt) / 16
	if lat < c.base {
		c.base = lat
	} else if c.srtt > c.base {
		f := min(1, float64(now-c.baseAt)/float64(baseDrift))
		c.base += (c.srtt - c.base) * f
	}
	c.baseAt = now
}

// latency reports how the smoothed latency compares with its baseline.
func (c *control) latency() (congested, queued bool) {
	if c.samples < minSamples {
		return false, false
	}
	return c.srtt > congestedRatio*c.base+float64(latencySlack),
		c.srtt > queuedRatio*c.base+2*float64(latencySlack)
}

// accel returns the growth multiplier: 1 right after a congestion signal,
// rising with the square of the seconds since.
func (c *control) accel(now int64) float64 {
	s := float64(now-c.lastCong) / 1e9
	return 1 + min(100, s*s)
}

// learn updates the limits with what permit p reported at now.
func (c *control) learn(p Permit, s Signal, now int64) {
	switch s {
	case SignalSuccess:
		if p.start != 0 {
			c.observe(float64(now-(p.start-1)), now)
		}
		c.share -= c.share / 64
		c.onSuccess(p, now)
	case SignalBackpressure:
		c.share += (1 - c.share) / 64
		c.onBackpressure(p, now)
	}
}

func (c *control) onSuccess(p Permit, now int64) {
	cong, queue := c.latency()
	if cong {
		c.lastCong = now
		c.slowStart = false
	}
	accel := c.accel(now)
	if p.flags&permitBoundL != 0 {
		switch {
		case c.slowStart:
			c.limit++
		case queue && p.flags&permitBoundR == 0:
			floor := minLimit + 1.25*c.admittedRate(now)*c.base/1e9 // what the admitted rate needs at the baseline latency, and some
			if c.limit > floor {
				c.limit = max(floor, c.limit-0.5/c.limit)
			}
		case !cong:
			c.limit += limitGrow / c.limit * accel
		}
		c.limit = min(max(c.limit, minLimit), c.maxLimit)
	}
	c.wall.record(p.n, false, now)
	if c.wallCheck--; c.wallCheck <= 0 {
		c.wallCheck = 64
		c.wallAt = c.wall.at(c.share, now)
	}
	c.capAtWall()
	if c.rate > 0 && p.flags&permitBoundR != 0 && !cong {
		// Per success, so that the share of backpressure does not depend
		// on the rate, and per second, so that a low rate recovers.
		dt := min(float64(now-c.lastGrow)/1e9, 1)
		c.rate *= 1 + rateGrow*accel + rateProbe*dt*(accel-1)
		c.rate = min(c.rate, max(2*c.admittedRate(now), 2*c.minRate))
	}
	c.lastGrow = now
}

func (c *control) onBackpressure(p Permit, now int64) {
	c.lastCong = now
	sent := p.start - 1 // -1 when untimed: then it was sent before any cut
	if c.slowStart {
		c.slowStart = false
		c.limit = max(minLimit, min(c.limit, float64(p.n))*limitCut)
	}
	c.wall.record(p.n, true, now)
	c.wallAt = c.wall.at(c.share, now)
	c.capAtWall()
	if c.rate == 0 {
		r := 0.9 * c.admittedRate(now)
		if r == 0 && c.srtt > 0 {
			r = float64(p.n) / (c.srtt / 1e9) / 2
		}
		c.rate = max(c.minRate, r)
		c.tokens, c.tokAt, c.lastRateCut = 0, now, now
		return
	}
	if sent >= c.lastRateCut && (c.wallAt == 0 || int(p.n) < c.wallAt) {
		cut := min(0.5, rateCut+0.3*c.share*c.share)
		c.rate = max(c.minRate, c.rate*(1-cut))
		c.tokens = min(c.tokens, c.burst())
		c.lastRateCut = now
	}
}

// capAtWall keeps the in-flight limit just under a known wall.
func (c *control) capAtWall() {
	if c.wallAt > 0 {
		c.limit = max(minLimit, min(c.limit, float64(c.wallAt)-0.5))
	}
}
