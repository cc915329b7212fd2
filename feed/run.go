package feed

import (
	"cmp"
	"context"
	"errors"
	"io"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// run is one Feed: what lives while it runs and ends with it. The Client
// keeps what outlives it (endpoints, transports, limiters, breakers, the
// budget, the writers).
type run struct {
	c    *Client
	done func(Operation, Result, error)
	// ctx ends when the caller's context ends or the feed stops: nothing
	// more is read and no new request goes out. sendCtx is the requests':
	// it ends Config.Grace after an interrupt, or at once at a stop that
	// abandons the wire.
	ctx, sendCtx     context.Context
	halt, cancelSend context.CancelCauseFunc
	ops              sync.WaitGroup
	work             chan *operation // to an idle sender
	idle             atomic.Int32    // senders waiting on work
	results          chan outcome    // to the hub
	// pace: whether the sole limiter's rate binds; while it does not, the
	// dispatch takes each operation's first permit (see dispatch). Only
	// the dispatching goroutine uses it.
	pace        ratePace
	hubDone     chan struct{} // closed when the hub returns
	finished    chan struct{} // closed when every operation of the run has ended
	counts      counts
	refusalsAt  int64 // the Client's budget refusals when the run began
	responsesAt int64 // the responses on the wire when the run began

	firstOut atomic.Bool                // a request of the run went out (see requestOut)
	watch    atomic.Pointer[time.Timer] // see requestOut
	watchEnd atomic.Bool
	cause    atomic.Pointer[stopRecord] // the first stop's
	unsent   atomic.Pointer[operation]  // dispatched but not sent, the last added first (see addUnsent)
	refused  atomic.Pointer[refusals]   // see noteRefusal
	broken   *InputError                // the broken input that ended the reading; only the dispatching goroutine uses it
}

// newRun returns the run of a Feed under ctx.
func (c *Client) newRun(ctx context.Context, done func(Operation, Result, error)) *run {
	r := &run{c: c, done: done, refusalsAt: c.refusals.Load(), responsesAt: c.wire.responses.Load()}
	r.work, r.finished = make(chan *operation), make(chan struct{})
	r.results, r.hubDone = make(chan outcome, resultsBuffer), make(chan struct{})
	// Ended by feed when ctx ends, with stopCause(ctx): the cause of
	// each operation's context, a child of it.
	r.ctx, r.halt = context.WithCancelCause(context.WithoutCancel(ctx))
	r.sendCtx, r.cancelSend = context.WithCancelCause(context.WithoutCancel(ctx))
	c.queues.start(window{n: c.slots(), max: cmp.Or(c.cfg.MaxDispatchBytes, DefaultMaxDispatchBytes), limit: c.dispatchLimit(), onWait: c.testWindowWait}, c.cfg.HoldBack)
	return r
}

// stop ends the feed with cause: nothing more is read and no new request
// goes out; with abandon (an outage too long, a TLS error) the requests on
// the wire are canceled too, else (a wrong setup) they are answered. The
// first cause is the feed's; stop reports whether cause is it.
func (r *run) stop(cause error, abandon bool) bool {
	first := r.cause.CompareAndSwap(nil, &stopRecord{cause})
	r.halt(cause)
	if abandon {
		r.cancelSend(cause)
	}
	return first
}

// stopped returns the first stop's cause, or nil.
func (r *run) stopped() error {
	if s := r.cause.Load(); s != nil {
		return s.err
	}
	return nil
}

// stopRecord holds the cause of a run's first stop.
type stopRecord struct{ err error }

// feed reads ops, dispatches each operation, waits for all of them, and
// reports.
func (r *run) feed(ctx context.Context, ops iter.Seq2[Operation, error]) Report {
	c := r.c
	start := time.Now()
	defer c.transport.CloseIdleConnections()
	defer r.halt(nil)
	defer r.cancelSend(nil)
	c.running.Store(r)
	defer c.running.Store(nil)
	// An interrupt halts the operations being sent (their contexts are
	// children of r.ctx): each ends at once, or, with a request on the
	// wire, once that request's answer is back (see opState).
	defer context.AfterFunc(ctx, func() { r.halt(stopCause(ctx)) })()
	defer r.endWatch()
	finished := make(chan struct{})
	graceDone := make(chan struct{})
	go func() {
		defer close(graceDone)
		r.cancelAfterGrace(ctx, finished)
	}()
	var progressDone chan struct{}
	if c.cfg.Progress > 0 {
		progressDone = make(chan struct{})
		go func() {
			defer close(progressDone)
			r.reportProgress(start, finished)
		}()
	}
	go r.hub()
	p := newPump()
	go p.run(ops)
	res, eof := r.dispatchAll(p)
	writeRest := !eof && c.failedOut != nil && !c.cfg.Resumable
	if !eof && !writeRest {
		if it, ok := p.end(); ok { // taken from ops: told as not sent
			r.left(&res, it)
		}
	}
	r.ops.Wait()
	close(r.finished)
	close(r.results) // every operation's outcome is in: the hub returns once it has finished them
	<-r.hubDone
	c.pause.disarm() // a feed that ended paused is not stopped later
	close(finished)
	<-graceDone // so that it says nothing once the feed is over
	if progressDone != nil {
		<-progressDone
	}
	r.settle(&res)
	if !eof {
		c.out.logf("%s: %s was not read\n", r.why(), res.unreadText())
		if writeRest {
			r.writeRest(&res, p)
		}
	}
	p.end()
	r.counters(&res, time.Since(start))
	res.counts = c.snapshot()
	r.writeUnread(&res)
	if c.failedOut != nil {
		res.hasFailedFile = true
		res.written, res.writeErr = c.failedOut.result()
		if c.unknownOut != c.failedOut {
			var err error
			res.unknownOut, err = c.unknownOut.result()
			res.writeErr = cmp.Or(res.writeErr, err)
		}
		if res.writeErr != nil {
			c.out.logf("writing the operations not acknowledged: %v; the file is incomplete\n", res.writeErr)
		}
	}
	res.resumable = c.cfg.Resumable
	if line := res.shortfall(); line != "" {
		c.out.logf("not fed: %s\n", line)
	}
	return res
}

// why says why the reading ended early.
func (r *run) why() string {
	if r.stopped() != nil {
		return "stopped"
	}
	return "interrupted"
}

// left ends the element the pump held when the feed stopped taking input:
// taken from ops, it is told like the others.
func (r *run) left(res *Report, it readItem) {
	if it.err == io.EOF {
		return
	}
	res.elements++
	if it.after.line > 0 {
		res.unread = it.after
	}
	if it.err != nil {
		r.badInput(res, it)
		return
	}
	it.op.seq = r.c.countRead(r)
	r.addUnsent(it.op)
}

// addUnsent keeps op, which the feed's stop left unsent, to be told at the
// end in input order.
func (r *run) addUnsent(op *operation) {
	for {
		op.nextUnsent = r.unsent.Load()
		if r.unsent.CompareAndSwap(op.nextUnsent, op) {
			return
		}
	}
}

// writeUnread writes the input from the broken JSON that stopped the
// reading on, if any, to Config.Unread, byte for byte.
func (r *run) writeUnread(res *Report) {
	c := r.c
	var syntax *syntaxError
	if c.cfg.Unread == nil || r.broken == nil || !errors.As(r.broken.Err, &syntax) {
		return
	}
	rest := r.broken.Rest()
	if rest == nil {
		c.out.logf("the input from %v on cannot be written: its first bytes are not kept\n", r.broken.from)
		return
	}
	n, err := io.Copy(c.cfg.Unread, rest)
	res.unreadBytes = n
	if err != nil {
		res.writeErr = cmp.Or(res.writeErr, err)
		c.out.logf("writing the unread input: %v\n", err)
	}
}

// cancelAfterGrace cancels the requests Config.Grace after ctx ends,
// unless the feed is finished first.
func (r *run) cancelAfterGrace(ctx context.Context, finished <-chan struct{}) {
	c := r.c
	select {
	case <-ctx.Done():
	case <-finished:
		return
	}
	// The operations not on the wire end before the message goes out
	// (the halt on r.ctx may not have run yet): whoever reads it may
	// answer the requests on the wire, and the permits they free must not
	// send another.
	r.halt(stopCause(ctx))
	switch n := c.wire.inFlight.Load(); {
	case n == 0:
		c.out.logf("interrupted: nothing in flight; stopping\n")
	case c.cfg.Grace > 0:
		reqs := "requests"
		if n == 1 {
			reqs = "request"
		}
		c.out.logf("interrupted: waiting up to %v for the %d %s in flight; interrupt again to quit at once\n", c.cfg.Grace, n, reqs)
	default:
		c.out.logf("interrupted: canceling the %d requests in flight\n", n)
	}
	t := time.NewTimer(c.cfg.Grace)
	defer t.Stop()
	select {
	case <-t.C:
		// The interrupt's cause, so that an operation not sent yet ends
		// as not sent, whichever cancellation reaches it first.
		r.cancelSend(stopCause(ctx))
	case <-finished:
	}
}

// settle tells every operation read but not sent, in input order, so
// that the -failed file keeps each document's order (a stop ends their
// goroutines in any order).
func (r *run) settle(res *Report) {
	var unsent []*operation
	for op := r.unsent.Swap(nil); op != nil; op = op.nextUnsent {
		unsent = append(unsent, op)
	}
	res.stopped = r.stopped()
	slices.SortStableFunc(unsent, func(a, b *operation) int { return cmp.Compare(a.seq, b.seq) })
	for _, op := range unsent {
		r.c.finish(r, outcome{op: op, how: endNotSent})
	}
	res.unsent = unsent
}

// counters fills in res with the run's counts after elapsed.
func (r *run) counters(res *Report, elapsed time.Duration) {
	c, k := r.c, &r.counts
	res.elapsed = elapsed
	res.ok, res.failed = k.ok.Load(), k.failed.Load()
	res.notFound, res.condFailed = k.notFound.Load(), k.condFailed.Load()
	res.operations, res.badInput, res.heldBack, res.unknown = k.read.Load(), k.badIn.Load(), k.heldBack.Load(), k.unknown.Load()
	res.refusals = c.refusals.Load() - r.refusalsAt
	c.fillReport(res)
}

// fillReport fills in what res shares with the Client: the wire, the
// limiter, the budget, the breaker, the pauses.
func (c *Client) fillReport(res *Report) {
	res.inFlight = c.wire.inFlight.Load()
	first := c.endpoints[0]
	res.wire, res.Limiter, res.Budget, res.Breaker = &c.wire, first.limiter, c.cfg.Budget, first.breaker
	res.pauses, res.paused, _ = c.pause.stats()
	res.endpoints = c.endpointsJSON()
}

// current returns the feed's counts so far, as a Report for the summary.
func (r *run) current(start time.Time) Report {
	var res Report
	r.counters(&res, time.Since(start))
	res.hasFailedFile = r.c.failedOut != nil
	if res.hasFailedFile {
		res.written, _ = r.c.failedOut.result()
	}
	return res
}

// writeRest writes the input that was not fed, read to its end from p, to
// Config.Failed: the feed stopped early. An operation that cannot be
// parsed is reported and counted, not written; an input error ends the
// reading, and res.unread then stays where the unfed input starts.
func (r *run) writeRest(res *Report, p *pump) {
	r.c.out.logf("writing the input not fed to the -failed file\n")
	for {
		it, ok := p.next(nil)
		if !ok || it.err == io.EOF {
			return
		}
		res.elements++
		switch {
		case it.err == nil:
			r.c.finish(r, outcome{op: it.op, how: endRest})
		case errors.As(it.err, new(*OperationError)):
			r.c.finish(r, outcome{elem: it.pub, how: endBadOp, cause: it.err, silent: true})
		default:
			var stop *InputError
			if errors.As(it.err, &stop) {
				res.unread, r.broken = stop.from, stop
				r.c.finish(r, outcome{elem: it.pub, how: endBadInput, cause: it.err})
				return
			}
			r.c.finish(r, outcome{elem: it.pub, how: endElemErr, cause: it.err})
		}
	}
}

// resultsBuffer is how many outcomes wait for the hub before their
// senders do.
const resultsBuffer = 64
