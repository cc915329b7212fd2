package retries

import (
	"math"
	"math/bits"
	"time"
)

// wall estimates the in-flight count at which a server starts to push back,
// if it has one: a concurrency wall, as a server with K slots and no queue
// has at K. It keeps, for every in-flight count n below wallExact, and for
// each range of counts 1/32 of an octave wide above it up to wallTop, how
// many attempts sent there succeeded and how many met backpressure,
// decaying with a time constant of wallMemory. A wall is the lowest count
// (above wallExact, the start of its range: a wall inside a range is found
// at the next one's, at most 1/32 above it) whose share of
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
	wallExact     = 64                    // counts below it have a bucket each
	wallTop       = 1 << 14               // counts at or above it are not kept
	wallBuckets   = wallExact + (14-6)*32 // 32 buckets an octave from wallExact to wallTop
	wallMemory    = 4 * time.Second
	wallMinWeight = 12
	wallMaxWeight = 4 * wallMinWeight
	wallShare     = 0.1
	wallContrast  = 3
)

// wallIndex returns the bucket of the in-flight count n (0 < n < wallTop).
func wallIndex(n uint32) int {
	if n < wallExact {
		return int(n)
	}
	e := bits.Len32(n) - 7 // octaves above [64, 128)
	return wallExact + e*32 + int(n>>(e+1))&31
}

// wallStart returns the lowest in-flight count of bucket i.
func wallStart(i int) int {
	if i < wallExact {
		return i
	}
	e, m := (i-wallExact)/32, (i-wallExact)%32
	return (32 + m) << (e + 1)
}

func (w *wall) bucket(i int, now time.Duration) *wallBucket {
	b := &w.buckets[i]
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
	if n == 0 || n >= wallTop {
		return
	}
	b := w.bucket(wallIndex(n), now)
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
	for i := 1; i < wallBuckets; i++ {
		if b := &w.buckets[i]; b.ok+b.throttled == 0 {
			continue // never held evidence: nothing to decay
		}
		b := w.bucket(i, now)
		if sum := b.ok + b.throttled; sum >= wallMinWeight && b.throttled >= need*sum {
			return wallStart(i)
		}
	}
	return 0
}
