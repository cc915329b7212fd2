package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
)

// Result is what became of an operation sent.
type Result struct {
	// Status is the final answer's HTTP status: 200 (or another 2xx), 412
	// (the condition was not met), 404 for a remove of a document that is
	// not there, or, for a failure, the status that ended it; 0 when no
	// response came.
	Status   int
	Attempts int // requests sent for it, retries included
}

// Error is an operation that was not acknowledged. Errors.As finds it in
// the error of Send and of Feed's done; errors.Is also matches what caused
// it, such as retries.ErrBudgetExhausted, retries.ErrBreakerOpen (an
// outage outlasted Config.MaxOutage), ErrNotSent, ErrHeldBack or the
// context's error.
type Error struct {
	// Status is the last answer's HTTP status; 0 when no response came.
	Status int
	// Unknown reports that the operation is not safe to repeat (a
	// conditional or arithmetic update) and that a request of it may have
	// been applied: it got no response, or a 500, 502 or 504.
	Unknown bool
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

var (
	// ErrNotSent is why an operation of a Feed was not sent: the feed
	// stopped (its context ended, an outage outlasted MaxOutage, a setup
	// error) before a request of it went out.
	ErrNotSent = errors.New("not sent")
	// ErrHeldBack is why an operation of a Feed was not sent: an earlier
	// operation on its document failed, and it must not overtake it.
	ErrHeldBack = errors.New("not sent: an earlier operation on the document failed")
	// ErrClosed is the error of a Send or Feed on a closed Client.
	ErrClosed = errors.New("feed: the client is closed")
)

// tell hands what became of an element of the running Feed to its done.
func (c *Client) tell(o Operation, r Result, err error) {
	if c.done != nil {
		c.done(o, r, err)
	}
}

// Feed sends the operations that ops yields, as the feed command does: it
// reads ops as it goes and sends as many at once as the limiter allows,
// one at a time per document id, in the order ops yields them. After an
// operation fails, the later ones on its document are not sent
// (ErrHeldBack).
//
// It calls done, if not nil, once for every element of ops: with the
// error ops yielded with it, or with the Result and the *Error (or nil)
// of the operation. done may be called from several goroutines at once.
//
// When ctx ends, Feed stops reading ops, sends no new request, gives the
// requests on the wire Config.Grace to be answered, and cancels the rest;
// the operations never sent end with ErrNotSent. Feed returns nil exactly
// when every element of ops was read and acknowledged; otherwise its error
// says how many were not. A Client runs one Feed at a time.
func (c *Client) Feed(ctx context.Context, ops iter.Seq2[Operation, error], done func(Operation, Result, error)) error {
	if !c.feeding.TryLock() {
		return errors.New("feed: Feed called while another Feed of the client runs")
	}
	defer c.feeding.Unlock()
	if !c.enter() {
		return ErrClosed
	}
	defer c.sends.Done()
	c.done = done
	c.live.reset()
	base := c.tally()
	c.outage.Store(nil)
	c.tlsErr.Store(nil)
	c.setupErr.Store(nil)
	c.broken = nil
	c.mu.Lock()
	c.base = base
	c.unsent, c.lastErr, c.failedIDs = nil, nil, make(map[string]bool, len(c.cfg.HoldBack))
	for _, id := range c.cfg.HoldBack {
		c.failedIDs[id] = true
	}
	c.refusal, c.refused = "", 0
	c.mu.Unlock()
	res := c.run(ctx, ops)
	// The Sends after the Feed are not halted by its end.
	c.done = nil
	c.live.reset()
	c.mu.Lock()
	c.last = res
	c.mu.Unlock()
	if res.Complete() {
		return nil
	}
	var cause error
	switch {
	case res.outage != nil:
		cause = res.outage
	case res.tlsErr != nil:
		cause = res.tlsErr
	case res.setupErr != nil:
		cause = res.setupErr
	case ctx.Err() != nil:
		cause = context.Cause(ctx)
	}
	msg := fmt.Sprintf("feed: %d of %d elements not acknowledged", res.failed, res.elements)
	if res.unread.line > 0 {
		msg += fmt.Sprintf(", and the input from %v on not read", res.unread)
	}
	if cause != nil {
		return fmt.Errorf("%s: %w", msg, cause)
	}
	return errors.New(msg)
}

// Counts returns the client's counts so far, since New: its Sends' and
// Feeds' operations, the requests on the wire, and the first endpoint's
// limit; Elapsed and Rate are zero.
func (c *Client) Counts() Progress { return c.snapshot() }

// Report returns the report of the last Feed that ended: its counts, the
// state of its limiter, budget and breaker, and what it wrote. Before a
// Feed has ended, it reports the client's Sends so far.
func (c *Client) Report() Report {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last.wire == nil {
		c.counters(&last, 0)
		last.counts = c.snapshot()
	}
	return last
}

// Send sends o, waiting until it is acknowledged or has failed, through
// the same layers as Feed: the limiter, the breaker, the budget and the
// retry rules that depend on whether o is safe to repeat. The Sends on
// one document id go out one at a time, in the order they began. It
// returns a nil error exactly when o was acknowledged: a 2xx, a 412, or a
// 404 for a remove; otherwise an *Error.
//
// Send is safe for any number of goroutines; they share the Client's
// limiter, which paces them.
func (c *Client) Send(ctx context.Context, o Operation) (Result, error) {
	op, err := prepare(o)
	if err != nil {
		return Result{}, &Error{Err: err}
	}
	if !c.enter() {
		return Result{}, &Error{Err: ErrClosed}
	}
	defer c.sends.Done()
	if err := c.outage.Load(); err != nil && c.pause.paused() {
		return Result{}, &Error{Err: err} // the outage has outlasted MaxOutage, and goes on
	}
	release, err := c.order.acquire(ctx, op.id)
	if err != nil {
		return Result{}, &Error{Err: err}
	}
	defer release()
	if c.sendSlots != nil { // a fixed concurrency: no limiter to pace the Sends
		select {
		case c.sendSlots <- struct{}{}:
			defer func() { <-c.sendSlots }()
		case <-ctx.Done():
			return Result{}, &Error{Err: context.Cause(ctx)}
		}
	}
	_, st := c.sendOp(ctx, op, false)
	if st.err != nil {
		return st.result, st.err
	}
	return st.result, nil
}

// Put sends a put of the document id with fields.
func (c *Client) Put(ctx context.Context, id string, fields json.RawMessage) (Result, error) {
	return c.Send(ctx, Operation{Kind: Put, ID: id, Fields: fields})
}

// Update sends an update of the document id with fields, each an update
// operation such as {"title": {"assign": "…"}}.
func (c *Client) Update(ctx context.Context, id string, fields json.RawMessage) (Result, error) {
	return c.Send(ctx, Operation{Kind: Update, ID: id, Fields: fields})
}

// Remove sends a remove of the document id.
func (c *Client) Remove(ctx context.Context, id string) (Result, error) {
	return c.Send(ctx, Operation{Kind: Remove, ID: id})
}

// Close stops new Sends and Feeds, which then fail with ErrClosed, waits
// for those running, and closes the idle connections. It returns nil.
func (c *Client) Close() error {
	c.closeMu.Lock()
	c.closed = true
	c.closeMu.Unlock()
	c.sends.Wait()
	c.transport.CloseIdleConnections()
	return nil
}

// enter counts a Send or Feed in, and reports false if c is closed.
func (c *Client) enter() bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return false
	}
	c.sends.Add(1)
	return true
}

// idOrder lets the Sends on one document id go one at a time, in the
// order they began.
type idOrder struct {
	mu   sync.Mutex
	last map[string]chan struct{} // per id: closed when the latest Send on it is done
}

// acquire waits until the Sends on id begun before are done, or ctx ends,
// and returns the function that lets the next one go.
func (o *idOrder) acquire(ctx context.Context, id string) (release func(), err error) {
	mine := make(chan struct{})
	o.mu.Lock()
	if o.last == nil {
		o.last = map[string]chan struct{}{}
	}
	prev := o.last[id]
	o.last[id] = mine
	o.mu.Unlock()
	release = func() {
		o.mu.Lock()
		if o.last[id] == mine {
			delete(o.last, id)
		}
		o.mu.Unlock()
		close(mine)
	}
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			// The next Send waits for the one before this, not for this.
			go func() { <-prev; release() }()
			return nil, context.Cause(ctx)
		}
	}
	return release, nil
}
