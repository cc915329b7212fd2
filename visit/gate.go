package visit

import (
	"context"
	"sync"
)

// gate bounds the requests of one endpoint in flight by how many visits
// its server serves at once, learned from its answers: a visitor slot is
// a count, and a 429 says the server serves those in flight besides it,
// and no more. A stream holds its place for as long as it lasts (which an
// attempt's permit of a retries.Limiter does not: it ends with the
// response's header).
//
// The limit starts at one and grows by one with each request the server
// takes (its 200's header), until the first 429 or the endpoint's slices;
// then it stays, and a probe for a slot freed since (a place of one more)
// comes after 2×limit requests taken without a 429, then after twice as
// many after each probe refused.
type gate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	most     int  // the limit's ceiling: the endpoint's slices
	slow     bool // slow start: no 429 yet
	taken    int  // requests taken since the limit last changed
	probe    int  // taken requests before the next probe
	wake     chan struct{}
}

func newGate(most int) *gate {
	return &gate{limit: 1, most: most, slow: true, probe: 2, wake: make(chan struct{})}
}

// crowded reports whether the server serves fewer visits at once than
// the endpoint has slices, which then take turns: a slice asks for a page
// rather than a stream, which would hold its place to the slice's end.
func (g *gate) crowded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit < g.most && !g.slow
}

// enter waits for a place, or for ctx to end.
func (g *gate) enter(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.inflight < g.limit {
			g.inflight++
			g.mu.Unlock()
			return nil
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// took says the server took a request in flight (it answered 200).
func (g *gate) took() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.limit >= g.most {
		return
	}
	if g.slow {
		g.grow()
		return
	}
	if g.taken++; g.taken >= g.probe*g.limit {
		g.grow()
	}
}

func (g *gate) grow() {
	g.limit, g.taken = g.limit+1, 0
	close(g.wake)
	g.wake = make(chan struct{})
}

// leave gives a place back; busy says the server refused the request
// with a 429.
func (g *gate) leave(busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if busy {
		if !g.slow {
			g.probe = min(2*g.probe, 64)
		}
		g.slow = false
		g.limit, g.taken = max(1, min(g.limit, g.inflight)), 0
	}
	close(g.wake)
	g.wake = make(chan struct{})
}
