package visit

import (
	"context"
	"sync"
)

// gate bounds the streams of one endpoint in flight by what its server
// serves at once, learned from its 429s. A stream holds its place for as
// long as it lasts, which an attempt's permit of a retries.Limiter does
// not (it ends with the response's header), and a visitor slot is a count:
// a 429 says the server serves those in flight besides it, and no more.
type gate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	most     int           // the limit's ceiling: the endpoint's slices
	calm     int           // streams ended without a 429 since the limit last changed
	wake     chan struct{} // closed when a place frees or the limit grows
}

func newGate(most int) *gate {
	return &gate{limit: most, most: most, wake: make(chan struct{})}
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

// leave gives the place back; busy says the server refused the stream
// with a 429, so that it serves no more than those still in flight. After
// four times the limit's streams without one, the limit grows by one, to find
// a slot freed since (another client gone).
func (g *gate) leave(busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	switch {
	case busy:
		g.limit, g.calm = max(1, min(g.limit, g.inflight)), 0
	case g.limit < g.most:
		if g.calm++; g.calm >= 4*g.limit {
			g.limit, g.calm = g.limit+1, 0
		}
	}
	close(g.wake)
	g.wake = make(chan struct{})
}
