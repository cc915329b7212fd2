package feed

import (
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
)

// dispatchAll takes the operations the pump reads and dispatches each,
// until the input ends or the run's context ends. While the feed is
// paused it takes one only when nothing it dispatched is left (see
// waitPause). It reports whether the input was read to its end or to an
// error that stops it, and, when it was not, res.unread says from where.
func (r *run) dispatchAll(p *pump) (res Report, eof bool) {
	res.unread = inputPos{line: 1} // where the input not yet taken starts
	for {
		if r.waitPause() != nil {
			return res, false
		}
		it, ok := p.next(r.ctx.Done())
		if !ok {
			return res, false
		}
		if it.err == io.EOF {
			res.unread = inputPos{}
			return res, true
		}
		res.elements++
		if it.after.line > 0 {
			res.unread = it.after
		}
		res.lineless = it.err == nil && it.pub.Line == 0
		if it.err != nil {
			if r.badInput(&res, it) {
				continue
			}
			return res, true
		}
		it.op.seq = r.c.countRead(r)
		if r.slots.take(r.ctx, it.op) != nil {
			r.addUnsent(it.op)
			return res, false
		}
		r.dispatch(it.op)
	}
}

// waitPause waits while the feed is paused by an outage, until the pause
// ends, or until nothing the feed dispatched is left: then one more
// operation goes, to wait at the breaker for its probe. An open breaker
// sends a probe only when a call is there to make it, and the operations
// waiting when it opened may all have ended since (failed with a status
// not retried, or refused by the budget), which would leave the feed
// silent until MaxOutage.
func (r *run) waitPause() error {
	for {
		resumed := r.c.pause.waiting.Load()
		if resumed == nil {
			return r.ctx.Err()
		}
		freed, empty := r.slots.watch()
		if empty {
			return r.ctx.Err()
		}
		select {
		case <-*resumed:
		case <-freed:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// badInput ends an element that ops yielded with an error, and reports
// whether the reading goes on: after an *OperationError or another error
// of the iterator's it does; after an *InputError (broken JSON, a read
// that failed) it stops, and res.unread is then where the unread input
// starts.
func (r *run) badInput(res *Report, it readItem) (goOn bool) {
	var stop *InputError
	switch {
	case errors.As(it.err, new(*OperationError)):
		r.c.finish(r, outcome{elem: it.pub, how: endBadOp, cause: it.err})
		return true
	case errors.As(it.err, &stop):
		res.unread = stop.from
		r.broken = stop
		r.c.finish(r, outcome{elem: it.pub, how: endBadInput, cause: it.err})
		return false
	default:
		r.c.finish(r, outcome{elem: it.pub, how: endElemErr, cause: it.err})
		return true
	}
}

// dispatch sends op, or leaves it in its document's queue behind the
// operation whose turn it is, so that operations on one document are
// applied in input order and a retry never overtakes a later operation.
func (r *run) dispatch(op *operation) {
	op.run = r
	r.ops.Add(1)
	if r.admit(op) && r.c.queues.join(op) {
		r.start(op)
	}
}

// admit reports whether op, whose turn it is or which is about to join its
// queue, may go out; if not, it ends op: not sent when the feed is
// stopping (held back, it would be written now, before the operations
// before it on its document, which may not have been sent), held back
// after a failure on its document.
func (r *run) admit(op *operation) bool {
	switch {
	case r.ctx.Err() != nil:
		r.addUnsent(op)
	case r.c.queues.failed(op.id):
		r.c.finish(r, outcome{op: op, elem: op.public(), how: endHeldBack})
	default:
		return true
	}
	r.release(op)
	return false
}

// release ends op's part in the run: its place in the window, its count.
func (r *run) release(op *operation) {
	r.slots.give(op)
	r.ops.Done()
}

// sendChain sends op, then each operation of the run whose turn comes
// after it on its document.
func (r *run) sendChain(op *operation) {
	for op != nil {
		if !r.c.sendFeedOp(r, op) { // the later operations must not overtake it
			r.c.queues.markFailed(op.id)
		}
		r.release(op)
		op = r.c.nextTurn(op.id)
	}
}

// start sends op's chain on an idle sender of the run, or a new one.
func (r *run) start(op *operation) {
	select {
	case r.work <- op:
	default:
		go r.sender(op)
	}
}

// sender sends op's chain, then the chains handed to it, until the run ends.
func (r *run) sender(op *operation) {
	for {
		r.sendChain(op)
		select {
		case op = <-r.work:
		case <-r.finished:
			return
		}
	}
}

// nextTurn ends the turn on document id and returns the operation of a
// Feed to send next on the calling goroutine, or nil: none is waiting, or
// the next is a Send's, whose goroutine goes on by itself. The operations
// of a Feed that may not go (see admit) are ended on the way.
func (c *Client) nextTurn(id string) *operation {
	for {
		op := c.queues.next(id)
		if op == nil || op.run == nil {
			return nil
		}
		if op.run.admit(op) {
			return op
		}
	}
}

// handOn ends the turn of a Send on document id, and starts the
// operation of a Feed whose turn it is then, if any.
func (c *Client) handOn(id string) {
	if op := c.nextTurn(id); op != nil {
		op.run.start(op)
	}
}

// docQueues keep the operations on each document in order, for Feed and
// Send alike: one at a time per document id, in the order they joined.
// The first in a document's queue has its turn; the others wait.
type docQueues struct {
	mu    sync.Mutex
	q     map[string][]*operation
	held  map[string]bool // the running Feed's documents with a failed operation: its later ones are held back
	joins atomic.Int64    // operations that joined, for tests
}

// holdBack starts a Feed, whose operations on the documents ids are held
// back.
func (d *docQueues) holdBack(ids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = make(map[string]bool, len(ids))
	for _, id := range ids {
		d.held[id] = true
	}
}

// failed reports whether an operation of the running Feed on document id
// failed, or id was to be held back from the start.
func (d *docQueues) failed(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[id]
}

// markFailed holds back the running Feed's later operations on document
// id.
func (d *docQueues) markFailed(id string) {
	d.mu.Lock()
	d.held[id] = true
	d.mu.Unlock()
}

// join adds op at the end of its document's queue, and reports whether
// its turn is now.
func (d *docQueues) join(op *operation) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.q == nil {
		d.q = map[string][]*operation{}
	}
	q := d.q[op.id]
	d.q[op.id] = append(q, op)
	d.joins.Add(1)
	return len(q) == 0
}

// next ends the turn on document id and returns the operation whose turn
// it is now, or nil. A Send's turn channel is closed, so that its
// goroutine goes on.
func (d *docQueues) next(id string) *operation {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.q[id][1:]
	if len(q) == 0 {
		delete(d.q, id)
		return nil
	}
	d.q[id] = q
	if q[0].turn != nil {
		close(q[0].turn)
	}
	return q[0]
}

// quit takes op, a Send's whose turn has not come, out of its document's
// queue and reports true, or reports false if its turn has come (then its
// Send ends it with handOn).
func (d *docQueues) quit(op *operation) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.q[op.id]
	i := slices.Index(q, op)
	if i <= 0 {
		return false
	}
	d.q[op.id] = slices.Delete(q, i, i+1)
	return true
}
