package retries

import (
	"math"
	"math/rand/v2"
	"time"
)

// climb lets the delivered rate overrule the latency rule. Latency that
// rises with the count in flight means a queue in the server only when the
// throughput stays flat: a client whose own CPU is the bottleneck, or a
// server that batches, sees latency rise while each step up in flight
// still delivers more. So while latency holds the in-flight limit's growth,
// climb tries, now and then, a step of climbGain and keeps it if the
// delivered rate paid for it.
//
// A trial compares the limit (arm A) with the step (arm B) in short slots
// of a few round trips, in the order A B B A, A B B A, …, so that a drift
// in what the client or the server can do (a noisy machine, a collection
// cycle) falls on both arms alike. Each slot counts the successes after a
// settling time of two round trips, while the count in flight follows the
// new limit. The step is kept when the throughput's elasticity to the
// count in flight was above climbUp for a step up, or not below climbDown
// for a step down, by more than its standard error (see verdict): a step
// up must pay, and a step down must cost next to nothing. A kept step is
// tried again from there at once, so that the limit climbs while it pays;
// a step that does not pay is undone, and the next trial waits twice as
// long as this one took (four times after two in a row), so that trials
// take a small share of the time where steps do not pay.
//
// A level reached by climbing (proven) is not shrunk by the latency rule.
// After a step up fails above it, the next trial is a step down, so that a
// level proven once does not stay for good. A queue in the server gives no
// throughput for a step, so latency still stops growth there.
// Backpressure ends a trial at once and forgets the proven level: the
// server, not the client, is then the bottleneck.
type climb struct {
	active  bool
	low     float64 // arm A: the limit before the trial
	step    float64 // arm B
	began   time.Duration
	slot    int           // the current slot, from 0
	from    time.Duration // the current slot's start
	slotLen time.Duration
	settle  time.Duration
	count   [2]float64       // successes in the settled part of each arm's slots
	spent   [2]time.Duration // the settled time of each arm's slots
	slotN   float64          // successes in the current slot's settled part
	m       [2]float64       // slots of each arm
	sum     [2]float64       // the sum of each arm's slot rates, per second
	sumSq   [2]float64       // and of their squares
	n, at   int              // successes in the trial, and those granted at the limit
	down    bool             // the next trial steps down
	proven  float64          // the level climbing kept; 0 if none
	fails   int              // trials in a row that kept nothing
	next    time.Duration    // no trial starts before
}

const (
	climbGain     = 1.25
	climbUp       = 0.05 // the elasticity a step up must show
	climbDown     = 0.03 // a step down is kept if it costs less than this elasticity
	climbMinSlot  = 10 * time.Millisecond
	climbSlotRTTs = 6   // a slot is at least this many round trips
	climbSlots    = 8   // a trial is at least this many slots (two A B B A rounds)
	climbSamples  = 500 // and this many successes counted for each arm
	climbMaxTrial = 2 * time.Second
	climbEvery    = 100 * time.Millisecond // the shortest gap between trials
)

// arm returns the arm of slot j: A B B A, A B B A, …
func arm(j int) int { return (j + 1) >> 1 & 1 }

// climbing reports whether a trial owns the in-flight limit, after
// advancing it with a success s at now; cong says whether latency holds
// growth.
func (c *control) climbing(s sample, cong bool, now time.Duration) bool {
	k := &c.climb
	if !k.active {
		if !cong || !s.atLimit || s.rateBound || c.slowStart || now < k.next {
			return false
		}
		if !c.beginTrial(c.limit, now) {
			k.next = now + climbEvery
			return false
		}
		return true
	}
	k.n++
	if s.atLimit {
		k.at++
	}
	a := arm(k.slot)
	if now-k.from >= k.settle {
		k.count[a]++
		k.slotN++
	}
	if now-k.from < k.slotLen {
		return true
	}
	d := now - k.from - k.settle
	k.spent[a] += d
	r := k.slotN / seconds(d)
	k.m[a]++
	k.sum[a] += r
	k.sumSq[a] += r * r
	k.slotN = 0
	k.slot++
	k.from = now
	if 2*k.at < k.n && k.slot >= climbSlots {
		// The limit did not bind: too little demand to learn from.
		c.endClimb(now)
		return false
	}
	decided, keep := k.verdict(now - k.began)
	if !decided {
		c.limit = k.low
		if arm(k.slot) == 1 {
			c.limit = k.step
		}
		return true
	}
	if !keep {
		k.down = !k.down && k.proven > 0
		c.endClimb(now)
		return false
	}
	// Kept; try the next step from there.
	k.proven, k.fails = k.step, 0
	k.active = false
	c.limit = k.step
	if !c.beginTrial(k.step, now) {
		k.next = now + climbEvery
		return false
	}
	return true
}

// verdict says whether a trial that has run for d can be decided, and if
// so whether its step is kept. The evidence is the throughput's elasticity
// to the count in flight: the log of arm B's rate over arm A's, against
// the log of their limits. A step up is kept when the elasticity is above
// climbUp by more than 1.5 standard errors of the measure, a step down
// when it is not below climbDown by more than one; the standard error
// comes from the spread of the slots' rates, and is at least what the
// counts alone would give, since a few slots can agree by chance. So a
// step up needs evidence, and a level that the evidence no longer
// supports is left. A trial is decided as soon as the elasticity is more
// than three standard errors from its threshold (a bound that checking
// after every slot needs), and at the latest after climbMaxTrial.
func (k *climb) verdict(d time.Duration) (decided, keep bool) {
	if k.slot < climbSlots || min(k.count[0], k.count[1]) < climbSamples {
		return false, false
	}
	var mean [2]float64
	var v, poisson float64 // the variance of the log of the rates' ratio, and its floor
	for a := range 2 {
		mean[a] = k.count[a] / seconds(k.spent[a])
		m := k.m[a]
		v += max(0, (k.sumSq[a]-k.sum[a]*k.sum[a]/m)/(m-1)) / (m * mean[a] * mean[a])
		poisson += 1 / k.count[a]
	}
	if mean[0] <= 0 || mean[1] <= 0 {
		return true, false
	}
	e := climbUp
	if k.down {
		e = climbDown
	}
	x := math.Log(mean[1]/mean[0]) - e*math.Log(k.step/k.low)
	se := math.Sqrt(max(v, poisson))
	bar := 1.5 * se // a step up is kept only if clearly better
	if k.down {
		bar = -se // a step down unless clearly worse
	}
	if math.Abs(x) > 3*se || d >= climbMaxTrial {
		return true, x > bar
	}
	return false, false
}

// beginTrial starts a trial from the limit low at now, or reports false
// when the step is out of bounds: under 2, over the maximum, or at a known
// wall.
func (c *control) beginTrial(low float64, now time.Duration) bool {
	k := &c.climb
	step := low * climbGain
	if k.down {
		step = low / climbGain
	}
	if step < minLimit+1 || step > c.maxLimit || c.wallAt > 0 && step >= float64(c.wallAt) {
		return false
	}
	srtt := time.Duration(c.latency.srtt)
	*k = climb{active: true, low: low, step: step, began: now, from: now,
		slotLen: max(climbMinSlot, climbSlotRTTs*srtt), settle: 2 * srtt,
		down: k.down, proven: k.proven, fails: k.fails}
	c.limit = low
	return true
}

// endClimb undoes a trial's step, if any, and schedules the next trial,
// jittered so that limiters started together do not try together.
func (c *control) endClimb(now time.Duration) {
	k := &c.climb
	if k.active {
		c.limit = k.low
	}
	k.active = false
	gap := max(climbEvery, 2*(now-k.began)) << min(k.fails, 1)
	k.fails++
	k.next = now + time.Duration(float64(gap)*(0.75+0.5*rand.Float64()))
}
