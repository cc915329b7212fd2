package retries

import (
	"math"
	"time"
)

// wall estimates the in-flight count at which a server starts to push back,
// if it has one: a concurrency wall, as a server with K slots and no queue
// has at K. It keeps, for every in-flight count n below wallBuckets, how
// many attempts sent at n succeeded and how many met backpressure, decaying
// with a time constant of wallMemory. A wall is the lowest n whose share of
// backpressure is high (at least wallShare, and wallContrast × the overall
// share) on enough attempts; a rate limiter, which pushes back whatever the
// count in flight, shows no such step.
//
// Once the evidence decays below wallMinWeight (the limit then keeps the
// count in flight under the wall, so no new evidence comes), the limit may
// grow past it again: the wall is probed about every wallMemory. Each
// count's evidence is capped at wallMaxWeight, so that a false wall (a
// burst against a rate limiter in slow start) is let go within about
// 1.4 × wallMemory however many attempts made it.
type wall struct {
	buckets [wallBuckets]wallBucket
}

type wallBucket struct {
	ok, throttled float64
	at            time.Duration
}

const (
	wallBuckets   = 64
	wallMemory    = 4 * time.Second
	wallMinWeight = 12
	wallMaxWeight = 4 * wallMinWeight
	wallShare     = 0.1
	wallContrast  = 3
)

func (w *wall) bucket(n uint32, now time.Duration) *wallBucket {
	b := &w.buckets[min(int(n), wallBuckets-1)]
	if dt := now - b.at; dt > 0 {
		if b.ok+b.throttled > 0 {
			f := math.Exp(-float64(dt) / float64(wallMemory))
			b.ok *= f
			b.throttled *= f
		}
		b.at = now
	}
	return b
}

// record counts an attempt sent with n in flight.
func (w *wall) record(n uint32, throttled bool, now time.Duration) {
	if n == 0 || int(n) >= wallBuckets {
		return
	}
	b := w.bucket(n, now)
	if throttled {
		b.throttled++
	} else {
		b.ok++
	}
	if sum := b.ok + b.throttled; sum > wallMaxWeight {
		b.ok *= wallMaxWeight / sum
		b.throttled *= wallMaxWeight / sum
	}
}

// at returns the in-flight count of the wall, or 0 if there is none, given
// the overall share of backpressure.
func (w *wall) at(share float64, now time.Duration) int {
	need := max(wallShare, wallContrast*share)
	for n := 1; n < wallBuckets; n++ {
		b := w.bucket(uint32(n), now)
		if sum := b.ok + b.throttled; sum >= wallMinWeight && b.throttled >= need*sum {
			return n
		}
	}
	return 0
}
