package feed

import (
	"context"
	"sync"
)

// DefaultMaxDispatchBytes bounds the operations dispatched at once by
// their size (their text and body), when Config.MaxDispatchBytes is 0.
const DefaultMaxDispatchBytes = 64 << 20

// window bounds what a feed has dispatched at once: at most n operations,
// and at most max bytes of them, though one larger operation alone may
// go; with limit set, also at most limit() operations, read at each take
// (a limit that rises is seen at the next give). Only the dispatching
// goroutine takes from it.
type window struct {
	n, max int
	limit  func() int
	onWait func(ops int) // for tests: called with the count dispatched when take is about to wait

	mu    sync.Mutex
	ops   int
	bytes int
	freed chan struct{} // closed at the next give; nil if nobody waits
}

// size is what op holds in memory while it is dispatched.
func (op *operation) size() int { return len(op.text) + len(op.body) }

// take waits until op fits in the window, or ctx ends.
func (w *window) take(ctx context.Context, op *operation) error {
	size := op.size()
	for {
		w.mu.Lock()
		if !w.fullLocked() && (w.ops == 0 || w.bytes+size <= w.max) {
			w.ops++
			w.bytes += size
			w.mu.Unlock()
			return nil
		}
		if w.freed == nil {
			w.freed = make(chan struct{})
		}
		freed := w.freed
		ops := w.ops
		w.mu.Unlock()
		if w.onWait != nil {
			w.onWait(ops)
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// full reports whether the window takes no more operations (by their
// count).
func (w *window) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fullLocked()
}

// fullLocked is full with w.mu held.
func (w *window) fullLocked() bool {
	return w.ops >= w.n || w.limit != nil && w.ops >= w.limit()
}

// give returns op's place in the window.
func (w *window) give(op *operation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops--
	w.bytes -= op.size()
	if w.freed != nil {
		close(w.freed)
		w.freed = nil
	}
}

// watch reports whether nothing is dispatched, and if something is, returns
// a channel closed at the next give.
func (w *window) watch() (freed <-chan struct{}, empty bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ops == 0 {
		return nil, true
	}
	if w.freed == nil {
		w.freed = make(chan struct{})
	}
	return w.freed, false
}
