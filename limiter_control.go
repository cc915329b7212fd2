package retries

import (
	"math"
	"time"
)

// control is a Limiter's control law: an in-flight limit and a rate limit
// (a token bucket), both learned from what released permits report. It is
// made of small parts, each advanced with the time now, since the Limiter
// was made: the bucket, the estimate of the rate the server admits, the
// latency tracker and the wall. Every method runs with the Limiter's lock
// held.
//
// The law, in short:
//   - Slow start: the in-flight limit starts at InitialInFlight (4 by
//     default) and grows by one per success granted at the limit (it
//     doubles every round trip while it binds) until the first
//     backpressure, which cuts it to limitCut × the count then in flight,
//     or a rise in latency that lasts two baseline round trips (a shorter
//     one holds it).
//   - Rate: off until the first backpressure, which turns it on at 0.9 ×
//     the admitted rate (the smoothed rate or the last bucket's, whichever
//     is higher; half the rate attempts were sent at, if none was admitted
//     yet). When a slow start that the server admitted at least once per
//     attempt then in flight ends on backpressure, its cut answers the
//     attempts sent before it, and only backpressure for one sent after
//     turns the rate on: a server whose wall is a count in flight then
//     needs no rate. Each later backpressure for an attempt sent since
//     the last cut (so at most one cut per round trip) first takes back
//     rateTakeBack/accel of its growth since the last cut (accel as
//     below, at the backpressure: little after a long silence), not below
//     the admitted rate, and then cuts it by rateCut, more while the share
//     of backpressure is high; each success granted
//     while the rate binds raises it by rateGrow × accel, plus rateProbe ×
//     (accel−1) per second, where accel = 1 + (time since the last
//     congestion signal / accelTime)², up to 101, and accelTime is two
//     typical gaps between backpressures (100 ms to 1 s: a silence long
//     for this server). So about rateGrow/(rateGrow+rateCut)
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
//     Backpressure for an attempt granted in slow start is no evidence of
//     a wall: while the count in flight doubles every round trip, attempts
//     granted later overtake one on its way (on another connection, or one
//     the proxy had to open), so the server counted more in flight than
//     the count it was granted at, by tens at a few hundred; slow start's
//     cut answers it. Nor is one granted untimed, far from the limits.
//   - Climb: while latency holds growth, trials of a step of 25 % (see
//     climb) let the delivered rate overrule it: a step that raises the
//     throughput is kept, and the latency rule does not shrink the limit
//     below a level so kept.
//   - Growth: the in-flight limit grows by limitGrow/limit × accel per
//     success granted at the limit, and by at least limitGrowShare (3 % a
//     round trip), while latency is normal; the rate is
//     capped at twice the admitted rate (a cap on growth, which never cuts
//     a rate already above it). Neither grows while it does not bind, so
//     an idle Limiter does not run away.
type control struct {
	limit, maxLimit float64
	slowStart       bool
	minRate         perSecond

	bucket   bucket
	admitted admissions
	latency  latencyTracker

	climb climb

	wall      wall
	wallAt    int // the wall's in-flight count, 0 if none
	wallCheck int // successes until the wall is looked at again

	rateAtCut                       perSecond // the rate right after the last cut
	lastCong, lastRateCut, lastGrow time.Duration
	// slowCut is when backpressure ended a slow start that the server
	// had admitted at least once per attempt then in flight; 0 if none did
	slowCut   time.Duration
	rampEnd   time.Duration // when slow start ended; 0 while it runs
	congSince time.Duration // latency has been high since; 0 if it is not
	congGap   time.Duration // smoothed gap between backpressures
	share     float64       // smoothed share of backpressure
	// probing is set by a Retry-After hold: once it ends, one attempt goes
	// until an outcome comes back.
	probing bool
}

const (
	initialLimit   = 4 // LimiterConfig.InitialInFlight's default
	minLimit       = 1
	limitGrow      = 0.25     // per round trip, while the in-flight limit binds
	limitGrowShare = 1.0 / 32 // per success, at least: ×1.03 a round trip
	limitCut       = 0.9      // the in-flight limit on leaving slow start, × the count in flight
	rateGrow       = 0.0004   // per success, while the rate binds
	rateCut        = 0.02     // per backpressure
	rateTakeBack   = 0.5      // of the growth since the last cut, at a cut
	rateProbe      = 0.05     // extra growth per second, so a low rate recovers
	rateBurst      = 5 * time.Millisecond
	rateBatch      = 3500 * time.Microsecond // the tokens granted together on one wakeup, at most (see Limiter.batch)
	congestedRatio = 1.5                     // smoothed latency over baseline: hold growth
	queuedRatio    = 2.0                     // smoothed latency over baseline: shrink
	latencySlack   = time.Millisecond        // and over baseline by this much (2× for shrink), so that jitter below a millisecond is not a queue
	baseDrift      = 30 * time.Second
	estBucket      = 50 * time.Millisecond
	estWindow      = 250 * time.Millisecond
	minSamples     = 16
)

// perSecond is a rate: attempts per second.
type perSecond float64

// in returns the count of r over d.
func (r perSecond) in(d time.Duration) float64 { return float64(r) * float64(d) / 1e9 }

// seconds returns d in seconds: the one place the law turns a duration
// into seconds, in the same floating-point steps wherever it does.
func seconds(d time.Duration) float64 { return float64(d) / 1e9 }

// sample is what a released permit tells the control law about its attempt.
type sample struct {
	n         uint32        // permits held when it was granted, itself included
	sent      time.Duration // when it was granted; -1 if it was not timed
	atLimit   bool          // the in-flight limit was reached when it was granted
	rateBound bool          // the rate limit bound when it was granted
	// batched: it was granted with others at once for the rate limit, so
	// n counts a burst, not a level in flight, and says nothing of a wall
	batched bool
}

func newControl(cfg LimiterConfig) control {
	maxLimit := float64(cfg.MaxInFlight)
	return control{maxLimit: maxLimit, limit: float64(cfg.InitialInFlight), slowStart: true, minRate: perSecond(cfg.MinRate)}
}

// slots returns the in-flight limit as a count.
func (c *control) slots() int {
	if c.probing {
		return 1
	}
	return max(1, int(c.limit))
}

// hold gives no permit before t (a Retry-After), and then one until an
// outcome comes back.
func (c *control) hold(t time.Duration) {
	c.bucket.holdUntil(t)
	c.probing = true
}

// learn updates the limits with what an attempt's release reported at now.
func (c *control) learn(s sample, sig Signal, now time.Duration) {
	if sig != SignalIgnore {
		c.probing = false
	}
	switch sig {
	case SignalSuccess:
		if s.sent >= 0 {
			c.latency.observe(now-s.sent, now)
		}
		c.share -= c.share / 64
		c.onSuccess(s, now)
	case SignalBackpressure:
		c.share += (1 - c.share) / 64
		c.onBackpressure(s, now)
	}
}

// accelTime is the time after a congestion signal at which growth
// doubles: two typical gaps between backpressure signals, between 100 ms
// and 1 s, so that a step up in capacity, a silence long for this server,
// is followed within about a second at any rate.
func (c *control) accelTime() time.Duration {
	if c.congGap <= 0 {
		return time.Second
	}
	return min(time.Second, max(100*time.Millisecond, 2*c.congGap))
}

// congested records a backpressure signal at now.
func (c *control) congested(now time.Duration) {
	if c.lastCong > 0 {
		gap := min(now-c.lastCong, 10*time.Second)
		if c.congGap == 0 {
			c.congGap = gap
		} else {
			c.congGap += (gap - c.congGap) / 8
		}
	}
	c.lastCong = now
}

// accel returns the growth multiplier: 1 right after a congestion signal,
// rising with the square of the seconds since.
func (c *control) accel(now time.Duration) float64 {
	s := seconds(now-c.lastCong) / seconds(c.accelTime())
	return 1 + min(100, s*s)
}

func (c *control) onSuccess(s sample, now time.Duration) {
	cong, queue := c.latency.state()
	switch {
	case !cong:
		c.congSince = 0
	case c.congSince == 0:
		c.congSince = now
		fallthrough
	default:
		c.lastCong = now // a latency signal: not a gap between backpressures
		if c.slowStart && now-c.congSince >= time.Duration(2*c.latency.base) {
			c.slowStart, c.rampEnd = false, now
		}
	}
	accel := c.accel(now)
	if climbing := c.climbing(s, cong, now); s.atLimit && !climbing {
		switch {
		case c.slowStart && cong:
			// A rise in latency for less than two round trips may be a
			// blip (a collection cycle, a busy machine): hold.
		case c.slowStart:
			c.limit++
		case queue && !s.rateBound:
			// What the admitted rate needs at the baseline latency (in
			// nanoseconds), and some.
			floor := max(c.climb.proven, minLimit+1.25*float64(c.admitted.rate(now))*c.latency.base/1e9)
			if c.limit > floor {
				c.limit = max(floor, c.limit-0.5/c.limit)
			}
		case !cong:
			c.limit += max(limitGrow/c.limit*accel, limitGrowShare)
		}
		c.limit = min(max(c.limit, minLimit), c.maxLimit)
	}
	if !s.batched {
		c.wall.record(s.n, false, now)
	}
	if c.wallCheck--; c.wallCheck <= 0 {
		c.wallCheck = 64
		c.wallAt = c.wall.at(c.share, now)
	}
	c.capAtWall()
	if b := &c.bucket; b.rate > 0 && s.rateBound && !cong {
		// Per success, so that the share of backpressure does not depend
		// on the rate, and per second, so that a low rate recovers.
		// Growth stops at twice the admitted rate, but never cuts the
		// rate: a rate learned before a lull (an outage, an idle spell)
		// holds until backpressure says otherwise.
		dt := min(seconds(now-c.lastGrow), 1)
		grown := b.rate * perSecond(1+rateGrow*accel+rateProbe*dt*(accel-1))
		b.rate = max(b.rate, min(grown, max(2*c.admitted.rate(now), 2*c.minRate)))
	}
	c.lastGrow = now
}

func (c *control) onBackpressure(s sample, now time.Duration) {
	accel := c.accel(now) // how long the silence this ends was
	c.congested(now)
	if c.climb.active {
		c.endClimb(now)
	}
	c.climb.proven, c.climb.down = 0, false
	if c.slowStart {
		c.slowStart, c.rampEnd = false, now
		c.limit = max(minLimit, min(c.limit, float64(s.n))*limitCut)
		if c.admitted.total >= int64(s.n) {
			c.slowCut = now
		}
	}
	// Attempts sent within a round trip of the ramp's end were granted at
	// its peak: their backpressure answers the overshoot, not a wall.
	if !s.batched && s.sent >= c.rampEnd+time.Duration(c.latency.srtt) {
		c.wall.record(s.n, true, now)
		c.wallAt = c.wall.at(c.share, now)
		c.capAtWall()
	}
	b := &c.bucket
	if b.rate == 0 {
		if c.slowCut > 0 && s.sent < c.slowCut {
			// Sent before the cut that ended slow start, which answers
			// it: a server with a concurrency wall needs no rate limit,
			// and one with a rate limit pushes back again within a round
			// trip, when the admitted rate is better known than in slow
			// start's ramp.
			return
		}
		// The admitted rate, or the last bucket's if higher: the smoothed
		// rate lags behind slow start's ramp.
		r := 0.9 * max(c.admitted.rate(now), c.admitted.last)
		if r == 0 {
			// Nothing admitted yet (the first answers were backpressure):
			// half the rate at which this attempt's peers were sent, over
			// the smoothed round trip or, with none, this attempt's, and
			// not the floor, which a limiter would take minutes to climb
			// from.
			rtt := time.Duration(c.latency.srtt)
			if rtt == 0 && s.sent >= 0 {
				rtt = now - s.sent
			}
			if rtt > 0 {
				r = perSecond(float64(s.n) / seconds(rtt) / 2)
			}
		}
		b.start(max(c.minRate, r), now)
		c.rateAtCut = b.rate
		c.lastRateCut = now
		return
	}
	// An untimed attempt (sent -1) was sent before any cut.
	if s.sent >= c.lastRateCut && (c.wallAt == 0 || int(s.n) < c.wallAt) {
		cut := min(0.5, rateCut+0.3*c.share*c.share)
		// Take back part of the growth since the last cut first, but
		// not below what the server admits, and less after a long
		// silence (a step up in capacity): after a usual gap every
		// limiter of a fleet has grown, and each 429 reaches only one
		// of them.
		base := b.rate
		if c.rateAtCut > 0 && base > c.rateAtCut {
			base = max(min(base, c.admitted.rate(now)), base-(base-c.rateAtCut)*perSecond(rateTakeBack/accel))
		}
		b.rate = max(c.minRate, base*perSecond(1-cut))
		c.rateAtCut = b.rate
		b.tokens = min(b.tokens, b.size())
		c.lastRateCut = now
	}
}

// capAtWall keeps the in-flight limit just under a known wall.
func (c *control) capAtWall() {
	if c.wallAt > 0 {
		c.limit = max(minLimit, min(c.limit, float64(c.wallAt)-0.5))
	}
}

// bucket is the rate limit, a token bucket of rateBurst's worth of tokens
// that fills at rate; a rate of 0 means no rate limit.
type bucket struct {
	rate   perSecond
	tokens float64
	at     time.Duration // when tokens was brought up to date
	until  time.Duration // no token before this (a Retry-After); 0: none
}

// holdUntil gives no token before t, and none saved up from before t.
func (b *bucket) holdUntil(t time.Duration) {
	b.until = max(b.until, t)
	b.tokens = min(b.tokens, 0)
	b.at = max(b.at, b.until)
}

// start turns the rate limit on at r, with an empty bucket.
func (b *bucket) start(r perSecond, now time.Duration) { b.rate, b.tokens, b.at = r, 0, now }

// size is the bucket's size: the tokens of rateBurst, at least one.
func (b *bucket) size() float64 { return max(1, float64(b.rate)*rateBurst.Seconds()) }

// available refills the bucket up to now and returns its tokens; without a
// rate limit there is always a token.
func (b *bucket) available(now time.Duration) float64 {
	if b.until != 0 {
		if now < b.until {
			return 0
		}
		b.until = 0
	}
	if b.rate == 0 {
		return math.Inf(1)
	}
	if dt := now - b.at; dt > 0 {
		b.tokens = min(b.size(), b.tokens+b.rate.in(dt))
		b.at = now
	}
	return b.tokens
}

// take spends a token and reports whether the bucket was less than full:
// calls are drawing on it as fast as it fills, so the rate binds.
func (b *bucket) take() bool {
	if b.rate == 0 {
		return false
	}
	bound := b.tokens < b.size()-0.5
	b.tokens--
	return bound
}

// refund gives back a token that was taken but not used.
func (b *bucket) refund() {
	if b.rate > 0 {
		b.tokens = min(b.size(), b.tokens+1)
	}
}

// untilTokens returns the time until the bucket holds n tokens.
func (b *bucket) untilTokens(now time.Duration, n float64) time.Duration {
	if now < b.until {
		return b.until - now
	}
	if b.rate == 0 {
		return 0
	}
	need := n - b.available(now)
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need/float64(b.rate)*float64(time.Second))) + 1
}

// admissions estimates the rate at which the server admits attempts, from
// the count admitted so far, smoothed over estWindow in buckets of
// estBucket.
type admissions struct {
	est     perSecond     // smoothed
	last    perSecond     // over the last bucket
	at      time.Duration // the end of the last bucket
	atTotal int64         // admitted attempts counted at at
	total   int64         // admitted attempts so far
	from    time.Duration // the first admission
	known   bool          // a bucket has completed: est holds
	started bool
}

// record records total, the attempts admitted so far, at now.
func (a *admissions) record(now time.Duration, total int64) {
	a.total = total
	if !a.started {
		a.started, a.at, a.from, a.atTotal = true, now, now, total
		return
	}
	dt := now - a.at
	if dt < estBucket {
		return
	}
	inst := perSecond(float64(total-a.atTotal) / seconds(dt))
	a.last = inst
	if !a.known {
		a.est, a.known = inst, true
	} else {
		f := float64(dt) / float64(dt+estWindow)
		a.est += perSecond(f) * (inst - a.est)
	}
	a.at, a.atTotal = now, total
}

// rate returns the smoothed admitted rate, or the rate since the first
// admission while no bucket has completed.
func (a *admissions) rate(now time.Duration) perSecond {
	if a.known {
		return a.est
	}
	if a.started && now-a.from > time.Millisecond {
		return perSecond(float64(a.total-a.atTotal) / seconds(now-a.from))
	}
	return 0
}

// latencyTracker keeps the smoothed latency of successful attempts and its
// baseline, in nanoseconds as floats, since smoothing needs fractions.
type latencyTracker struct {
	srtt, base float64
	baseAt     time.Duration
	samples    int
}

// observe takes the latency lat of a successful attempt, measured at now.
func (l *latencyTracker) observe(lat, now time.Duration) {
	x := max(float64(lat), 1)
	l.samples++
	if l.srtt == 0 {
		l.srtt, l.base, l.baseAt = x, x, now
		return
	}
	l.srtt += (x - l.srtt) / 16
	if x < l.base {
		l.base = x
	} else if l.srtt > l.base {
		f := min(1, float64(now-l.baseAt)/float64(baseDrift))
		l.base += (l.srtt - l.base) * f
	}
	l.baseAt = now
}

func (l *latencyTracker) smoothed() time.Duration { return time.Duration(l.srtt) }
func (l *latencyTracker) baseline() time.Duration { return time.Duration(l.base) }

// state reports how the smoothed latency compares with its baseline.
func (l *latencyTracker) state() (congested, queued bool) {
	if l.samples < minSamples {
		return false, false
	}
	return l.srtt > congestedRatio*l.base+float64(latencySlack),
		l.srtt > queuedRatio*l.base+2*float64(latencySlack)
}
