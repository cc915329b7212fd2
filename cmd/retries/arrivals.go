package main

import (
	"math/rand/v2"
	"time"
)

// arrivals are the due times of a bench's queries, as offsets from its
// start: constant, query i at i/rate (vespa-fbench's -r); or poisson, the
// gaps between queries drawn independently from an exponential law of
// mean 1/rate, as requests from many independent users arrive (Lancet's
// and k6's arrival-rate executors offer it). Both are open loop: a query
// is due at its time whatever the answers before it do.
type arrivals struct {
	rate    float64
	poisson bool
	rng     *rand.Rand
	at      time.Duration // the last due time given
}

func newArrivals(rate float64, poisson bool, seed uint64) *arrivals {
	return &arrivals{rate: rate, poisson: poisson, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// due returns query i's due time; i counts from 0, one call each in order.
func (a *arrivals) due(i int64) time.Duration {
	if !a.poisson {
		return time.Duration(float64(i) / a.rate * float64(time.Second))
	}
	if i > 0 {
		a.at += time.Duration(a.rng.ExpFloat64() / a.rate * float64(time.Second))
	}
	return a.at
}
