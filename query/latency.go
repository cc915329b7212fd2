package query

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// latencies keeps the round trips of the last requests answered with a
// whole or partial result, and a quantile of them, worked out again every
// recomputeEvery additions: the hedge's delay.
type latencies struct {
	q float64 // the quantile, such as 0.95

	mu   sync.Mutex
	ring [1024]time.Duration
	n, i int
	adds int

	quantile atomic.Int64 // the last quantile worked out; 0 before minSamples
}

const (
	recomputeEvery = 32
	minSamples     = 20 // no hedge before this many round trips are known
)

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.i] = d
	l.i = (l.i + 1) % len(l.ring)
	l.n = min(l.n+1, len(l.ring))
	l.adds++
	if l.n < minSamples || (l.adds%recomputeEvery != 0 && l.n > minSamples) {
		return
	}
	s := slices.Clone(l.ring[:l.n])
	slices.Sort(s)
	l.quantile.Store(int64(s[min(int(l.q*float64(len(s))), len(s)-1)]))
}

// get returns the quantile, and false before minSamples round trips.
func (l *latencies) get() (time.Duration, bool) {
	q := l.quantile.Load()
	return time.Duration(q), q > 0
}
