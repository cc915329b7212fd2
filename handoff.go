package retries

import (
	"context"
	"sync/atomic"
)

// HandPermit returns a copy of ctx that carries p, a permit its Limiter
// granted, and a function that ends the hand-over. The first attempt of a
// call made under the returned context (or one derived from it), by a
// policy with p's Limiter, takes p as its own instead of acquiring a
// permit, and releases it with its outcome as any attempt does; if the
// call's breaker is not closed, the call releases p unused before it
// waits, so that no permit is held while nothing is sent. done releases p,
// with SignalIgnore, if no attempt took it: call it once the call is over.
//
// It lets one dispatching goroutine wait for the limiter for many
// operations, each started once it has its permit, where each operation
// would otherwise wait for its permit on a goroutine of its own, woken
// one release at a time.
func HandPermit(ctx context.Context, p Permit) (_ context.Context, done func()) {
	if p.l == nil {
		return ctx, func() {}
	}
	p.flags |= permitHanded
	h := &handed{Context: ctx, p: p}
	p.l.handed.Add(1)
	// Close the fast path, which would grant the call a second permit:
	// the slow path (admit) looks for a handed one first. The next
	// update of the fast path under the lock reopens it once no permit
	// is handed.
	p.l.fast.Store(0)
	return h, h.release
}

// handedKey is the context key of a *handed.
type handedKey struct{}

// handed is a permit handed to a call's first attempt (see HandPermit),
// and the context that carries it: one allocation, where a context value
// and a record would be two.
type handed struct {
	context.Context
	p     Permit
	taken atomic.Bool
}

// Value returns h for handedKey, and the parent's values otherwise.
func (h *handed) Value(key any) any {
	if key == (handedKey{}) {
		return h
	}
	return h.Context.Value(key)
}

// take reports whether the permit is the caller's now: nobody took or
// released it before.
func (h *handed) take() bool {
	if !h.taken.CompareAndSwap(false, true) {
		return false
	}
	h.p.l.handed.Add(-1)
	return true
}

// release releases the permit unused, unless it was taken.
func (h *handed) release() {
	if h.take() {
		h.p.Release(SignalIgnore)
	}
}

// takeHanded returns the permit handed to ctx for s's limiter and not
// taken yet, taken now; or false. It costs an atomic load when no permit
// of the limiter is handed. Only admit calls it: while a permit is handed,
// the limiter's fast path is closed, so a first attempt comes to admit.
func (s *shared) takeHanded(ctx context.Context) (Permit, bool) {
	l := s.limiter
	if l == nil || l.handed.Load() == 0 {
		return Permit{}, false
	}
	h, _ := ctx.Value(handedKey{}).(*handed)
	if h == nil || h.p.l != l || !h.take() {
		return Permit{}, false
	}
	return h.p, true
}
