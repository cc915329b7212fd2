package feed

import (
	"context"
	"errors"
	"io"
	"iter"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// readItem is what the pump read: an operation, or an error with the
// Operation it came with.
type readItem struct {
	op    *operation
	err   error
	pub   Operation // with err: what ops yielded with it
	after inputPos  // where the input after op or an *OperationError starts; line 0 if unknown
}

// pump hands what ops yields, each Operation prepared, to the dispatching
// goroutine from a goroutine of its own, so that an interrupt ends the
// feed even while a read blocks (a quiet pipe on stdin); that goroutine
// then stays blocked until the process exits. An element that ops yields
// is taken (its yield returns true) exactly when it reaches the feed:
// handed over, or held when the feed stopped taking input (see end).
type pump struct {
	items chan readItem
	stop  chan struct{}
	left  chan readItem // the element held when stop closed

	// state counts the elements the pump took in hand, with pumpClosed
	// set once the feed takes no more (ops is told to stop): one word, so
	// that end knows at once whether an element is in hand.
	state atomic.Uint64
	taken uint64 // the elements the feed received; only the feed's goroutine uses it
}

// pumpClosed is the bit of pump.state set by end.
const pumpClosed = 1 << 63

func newPump() *pump {
	return &pump{items: make(chan readItem), stop: make(chan struct{}), left: make(chan readItem, 1)}
}

// run yields ops to the feed, until ops ends (then io.EOF) or the feed
// takes no more.
func (p *pump) run(ops iter.Seq2[Operation, error]) {
	for o, err := range ops {
		it := readItem{err: err}
		var bad *OperationError
		switch {
		case err == nil:
			if it.op, err = prepare(o); err != nil {
				it.err, it.pub = &OperationError{Line: o.Line, Err: err}, o
			} else {
				it.after = it.op.after
			}
		case errors.As(err, &bad):
			it.after, it.pub = bad.after, o
		default:
			it.pub = o
		}
		if !p.give(it) {
			return
		}
	}
	p.give(readItem{err: io.EOF})
}

// give hands it to the feed, or, when the feed stopped taking input while
// give waited, leaves it for end; it reports false when the feed had
// stopped before it came: then it is not taken, and ops is told to stop.
func (p *pump) give(it readItem) bool {
	for {
		s := p.state.Load()
		if s&pumpClosed != 0 {
			return false
		}
		if p.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	select {
	case p.items <- it:
	case <-p.stop:
		p.left <- it // taken: end hands it to the feed
	}
	return true
}

// next returns the next element, or false when done ends first.
func (p *pump) next(done <-chan struct{}) (readItem, bool) {
	select {
	case it := <-p.items:
		p.taken++
		return it, true
	case <-done:
		return readItem{}, false
	}
}

// end stops the pump, and returns the element it held, if any: taken from
// ops but not handed over.
func (p *pump) end() (readItem, bool) {
	held := p.state.Or(pumpClosed)
	if held&pumpClosed != 0 {
		return readItem{}, false
	}
	close(p.stop)
	if held == p.taken {
		return readItem{}, false
	}
	return <-p.left, true
}

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
		res.lineless = it.err == nil && it.op.pub.Line == 0
		if it.err != nil {
			if r.badInput(&res, it) {
				continue
			}
			return res, true
		}
		it.op.seq = r.c.countRead(r)
		if r.c.queues.take(r.ctx, it.op) != nil {
			r.addUnsent(it.op)
			return res, false
		}
		r.dispatch(it.op)
	}
}

// countRead counts an operation read, and returns its place in the feed.
func (c *Client) countRead(r *run) int64 {
	c.total.read.Add(1)
	return r.counts.read.Add(1)
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
		freed, empty := r.c.queues.watch()
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
		r.results <- outcome{elem: it.pub, how: endBadOp, cause: it.err}
		return true
	case errors.As(it.err, &stop):
		res.unread = stop.from
		r.broken = stop
		r.results <- outcome{elem: it.pub, how: endBadInput, cause: it.err}
		return false
	default:
		r.results <- outcome{elem: it.pub, how: endElemErr, cause: it.err}
		return true
	}
}

// dispatch sends op, or leaves it in its document's queue behind the
// operation whose turn it is, so that operations on one document are
// applied in input order and a retry never overtakes a later operation.
// It ends op at once when the feed is stopping (not sent: held back, it
// would be written now, before the operations before it on its
// document, which may not have been sent), or when an earlier operation
// on its document failed (held back).
func (r *run) dispatch(op *operation) {
	op.run = r
	r.ops.Add(1)
	if r.ctx.Err() != nil {
		r.addUnsent(op)
		r.release(op)
		return
	}
	switch turn, held := r.c.queues.join(op); {
	case held:
		r.results <- outcome{op: op, how: endHeldBack, release: true}
	case turn:
		if l := r.c.soleLimiter; l != nil {
			// Wait for its first attempt's permit here, one operation at
			// a time, so that the operations started are those that may
			// go: each would otherwise wait for its permit on its sender,
			// woken one release at a time. A permit freed while this
			// goroutine comes back is taken at once. Not while the rate
			// limit binds: the limiter then grants its waiters in
			// batches, one wakeup for several, and this goroutine alone
			// would be woken for every permit. It is looked at every 64
			// operations.
			if op.seq&63 == 1 {
				r.pace.look(l.Stats(), time.Now())
			}
			if !r.pace.binds {
				op.permit, _ = l.Acquire(r.ctx) // ended: send tells it not sent
			}
		}
		r.start(op)
	}
}

// ratePace tells whether a limiter's rate limit binds, from its Stats
// taken at intervals: only the dispatching goroutine uses it.
type ratePace struct {
	at       time.Time
	released int64 // the limiter's permits released by at
	binds    bool  // as the last look found
}

// paceWindow is the shortest time over which ratePace measures the
// attempts released: the dispatch looks every 64 operations, which a
// window opening after a wait dispatches in a fraction of a millisecond.
const paceWindow = 100 * time.Millisecond

// look sets binds to whether the limiter whose Stats are st at now holds
// its attempts back by its rate limit: the limit is on, and allows less
// than 1.25 times the attempts released over the last paceWindow or more
// (or nothing was measured yet). A limit above that leaves the in-flight
// limit, or the input, to bind: the limiter lets its rate grow to twice
// the rate admitted. Looked at again before paceWindow, binds stays.
func (p *ratePace) look(st retries.LimiterStats, now time.Time) {
	released := st.Successes + st.Throttles + st.Failures
	switch {
	case st.Rate == 0:
		p.binds = false
	case p.at.IsZero():
		p.binds = true
	case now.Sub(p.at) < paceWindow:
		return
	default:
		sent := float64(released-p.released) / now.Sub(p.at).Seconds()
		p.binds = st.Rate < 1.25*sent
	}
	p.at, p.released = now, released
}

// release ends the part in the run of op, which never joined its
// document's queue: its place in the window, its count.
func (r *run) release(op *operation) {
	r.c.queues.give(op)
	r.ops.Done()
}

// send sends op, whose turn on its document it is, and hands what came
// of it to the hub: not sent when the feed is stopping, held back after a
// failure on its document (see dispatcher.next), or its outcome.
func (r *run) send(op *operation) {
	var o outcome
	switch {
	case r.ctx.Err() != nil:
		r.addUnsent(op)
		o = outcome{op: op, how: endNotSent, later: true}
	case op.held:
		o = outcome{op: op, how: endHeldBack}
	default:
		o = r.c.sendOp(r.ctx, r.sendCtx, r, op)
	}
	if op.permit != (retries.Permit{}) { // not sent: its permit was not taken
		op.permit.Release(retries.SignalIgnore)
		op.permit = retries.Permit{}
	}
	o.turn = true
	r.results <- o
}

// start sends op on an idle sender of the run, or a new one.
func (r *run) start(op *operation) {
	select {
	case r.work <- op:
	default:
		go r.sender(op)
	}
}

// maxIdleSenders bounds the senders that wait for work. A feed whose
// operations in flight fell (a slow start's overshoot cut, a burst over)
// would otherwise keep a goroutine for each of its peak until it ends, and
// their shallow stacks pull the runtime's size of a new goroutine's stack
// (the average in use) down to 4 KiB: each HTTP/2 request's goroutine then
// grows its own, 6 % of a feed's CPU at 512 in flight (docs/performance.md).
const maxIdleSenders = 16

// sender sends op, then those handed to it, until the run ends, or until
// more than maxIdleSenders wait for work.
func (r *run) sender(op *operation) {
	for {
		r.send(op)
		if r.idle.Add(1) > maxIdleSenders {
			r.idle.Add(-1)
			return
		}
		select {
		case op = <-r.work:
			r.idle.Add(-1)
		case <-r.finished:
			return
		}
	}
}

// nextTurn ends the turn of done, which ended (failed: neither
// acknowledged nor kept, so that its Feed's later operations on the
// document are held back), and its part in its run, if it is a Feed's. It
// returns the operation of a Feed whose turn it is now, to start, or nil:
// none is waiting, or the next is a Send's, whose goroutine goes on by
// itself.
func (c *Client) nextTurn(done *operation, failed bool) *operation {
	op, held := c.queues.next(done, failed)
	if done.run != nil {
		done.run.ops.Done()
	}
	if op == nil || op.run == nil {
		return nil
	}
	op.held = held
	return op
}

// handOn ends the turn of op on its document (failed: see nextTurn), and
// starts the operation of a Feed whose turn it is then, if any, on a
// sender of its Feed, which tells the hub if it may not go (see send). The
// hub calls it for a Feed's operations, a Send for its own.
func (c *Client) handOn(op *operation, failed bool) {
	if next := c.nextTurn(op, failed); next != nil {
		next.run.start(next)
	}
}

// dispatcher keeps what the dispatch of operations shares, under one
// lock, as the Dispatcher of Vespa's feed client does: a queue per
// document, for Feed and Send alike (one operation at a time per document
// id, in the order they joined: the first in a queue has its turn, the
// others wait), and the running Feed's window and documents held back.
type dispatcher struct {
	mu    sync.Mutex
	q     map[string][]*operation
	held  map[string]bool // the running Feed's documents with a failed operation: its later ones are held back
	win   window          // the running Feed's
	joins atomic.Int64    // operations that joined, for tests
}

// window bounds what a feed has dispatched at once: at most n operations,
// and at most max bytes of them, though one larger operation alone may
// go; with limit set, also at most limit() operations, read at each take
// (a limit that rises is seen at the next give). Only the dispatching
// goroutine takes from it. Its fields are under dispatcher.mu.
type window struct {
	n, max int
	limit  func() int
	onWait func(ops int) // for tests: called with the count dispatched when take is about to wait

	ops   int
	bytes int
	freed chan struct{} // closed at the next give; nil if nobody waits
}

// dispatchLimit bounds the operations a feed with limiters dispatches at
// once: the sum of the endpoints' in-flight limits, plus queuedPerLimiter
// for each. It is nil with a fixed concurrency.
func (c *Client) dispatchLimit() func() int {
	if c.cfg.Concurrency > 0 {
		return nil
	}
	return func() int {
		n := 0
		for _, e := range c.endpoints {
			n += int(math.Ceil(e.limiter.Stats().Limit)) + queuedPerLimiter
		}
		return n
	}
}

// queuedPerLimiter is how many operations a feed dispatches beyond its
// limiters' limits: enough that a permit freed or a limit raised finds
// operations waiting for it until the next one ends, and few enough that
// a feed whose limiter holds 20 in flight does not park a thousand
// goroutines (each costs the collector a stack to scan at every cycle).
const queuedPerLimiter = 64

// DefaultMaxDispatchBytes bounds the operations dispatched at once by
// their size (their text and body), when Config.MaxDispatchBytes is 0.
const DefaultMaxDispatchBytes = 64 << 20

// size is what op holds in memory while it is dispatched.
func (op *operation) size() int { return len(op.text) + len(op.body) }

// start starts a Feed with the window w, whose operations on the
// documents ids are held back.
func (d *dispatcher) start(w window, ids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.win = w
	d.held = make(map[string]bool, len(ids))
	for _, id := range ids {
		d.held[id] = true
	}
}

// take waits until op fits in the window, or ctx ends.
func (d *dispatcher) take(ctx context.Context, op *operation) error {
	size := op.size()
	w := &d.win
	for {
		d.mu.Lock()
		if !d.fullLocked() && (w.ops == 0 || w.bytes+size <= w.max) {
			w.ops++
			w.bytes += size
			d.mu.Unlock()
			return nil
		}
		freed, ops, onWait := w.freedLocked(), w.ops, w.onWait
		d.mu.Unlock()
		if onWait != nil {
			onWait(ops)
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
func (d *dispatcher) full() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fullLocked()
}

// fullLocked is full with d.mu held.
func (d *dispatcher) fullLocked() bool {
	w := &d.win
	return w.ops >= w.n || w.limit != nil && w.ops >= w.limit()
}

// give returns op's place in the window.
func (d *dispatcher) give(op *operation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.giveLocked(op)
}

// giveLocked is give with d.mu held.
func (d *dispatcher) giveLocked(op *operation) {
	w := &d.win
	w.ops--
	w.bytes -= op.size()
	if w.freed != nil {
		close(w.freed)
		w.freed = nil
	}
}

// watch reports whether nothing is dispatched, and if something is,
// returns a channel closed at the next give.
func (d *dispatcher) watch() (freed <-chan struct{}, empty bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.win.ops == 0 {
		return nil, true
	}
	return d.win.freedLocked(), false
}

// freedLocked returns the channel closed at the next give. The
// dispatcher's lock is held.
func (w *window) freedLocked() <-chan struct{} {
	if w.freed == nil {
		w.freed = make(chan struct{})
	}
	return w.freed
}

// join adds op at the end of its document's queue, and reports whether
// its turn is now; or, for an operation of the running Feed whose
// document is held back and whose queue is empty, reports held and leaves
// it out (with operations queued, it waits behind them, so that the
// operations held back are told in input order).
func (d *dispatcher) join(op *operation) (turn, held bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.q[op.id]
	if op.run != nil && len(q) == 0 && d.held[op.id] {
		return false, true
	}
	if d.q == nil {
		d.q = map[string][]*operation{}
	}
	d.q[op.id] = append(q, op)
	d.joins.Add(1)
	return len(q) == 0, false
}

// next ends the turn of done on its document (a Feed's gives back its
// place in the window, and holds its document back when it failed), and
// returns the operation whose turn it is now, or nil, and whether that
// one is a Feed's whose document is held back. A Send's turn channel is
// closed, so that its goroutine goes on.
func (d *dispatcher) next(done *operation, failed bool) (*operation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if done.run != nil {
		if failed {
			d.held[done.id] = true
		}
		d.giveLocked(done)
	}
	id := done.id
	q := d.q[id][1:]
	if len(q) == 0 {
		delete(d.q, id)
		return nil, false
	}
	d.q[id] = q
	op := q[0]
	if op.turn != nil {
		close(op.turn)
	}
	return op, op.run != nil && d.held[op.id]
}

// quit takes op, a Send's whose turn has not come, out of its document's
// queue and reports true, or reports false if its turn has come (then its
// Send ends it with handOn).
func (d *dispatcher) quit(op *operation) bool {
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
