package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
)

// Result is what became of an operation sent.
type Result struct {
	// Status is the final answer's HTTP status: 200 (or another 2xx), 412
	// (the condition was not met; to a put or a remove without a condition
	// it is a failure, as no condition can fail), 404 for a remove of a document that is
	// not there, or, for a failure, the status that ended it; 0 when no
	// response came.
	Status   int
	Attempts int // requests sent for it, retries included
	// Message is the server's message with an answer other than a 2xx
	// (why a condition was not met, why it failed), with the header
	// values the feed sends redacted; "" otherwise.
	Message string
	// Trace is the trace the server returned with an answer other than a
	// 2xx, as JSON, when Config.TraceLevel is above 0; "" otherwise.
	Trace string
}

// ConditionNotMet reports whether the server answered that the
// operation's test-and-set condition was not met (412): nothing was
// applied, and sending it again changes nothing. Vespa's Java client calls
// it conditionNotMet; pyvespa's is_successful() is false for it.
func (r Result) ConditionNotMet() bool { return r.Status == http.StatusPreconditionFailed }

// NotFound reports whether the server answered a remove with 404: there
// was no such document to remove.
func (r Result) NotFound() bool { return r.Status == http.StatusNotFound }

// Error is an operation that was not acknowledged. Errors.As finds it in
// the error of Send and of Feed's done; errors.Is also matches what caused
// it, such as retries.ErrBudgetExhausted, retries.ErrBreakerOpen (an
// outage outlasted Config.MaxOutage), ErrNotSent, ErrInterrupted,
// ErrHeldBack or the context's error.
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
	// ErrInterrupted is why an operation of a Feed whose context ended was
	// not acknowledged though a request of it went out: the request was
	// canceled on the wire, after Config.Grace, or it was sent and no
	// answer came. Such an operation may have been applied (an operation
	// not safe to repeat then ends with Error.Unknown).
	ErrInterrupted = errors.New("interrupted")
	// ErrHeldBack is why an operation of a Feed was not sent: an earlier
	// operation on its document failed, and it must not overtake it.
	ErrHeldBack = errors.New("held back: an earlier operation on the document failed")
	// ErrClosed is the error of a Send or Feed on a closed Client.
	ErrClosed = errors.New("feed: the client is closed")
)

// Feed sends the operations that ops yields, as the feed command does: it
// reads ops as it goes and sends as many at once as the limiter allows,
// one at a time per document id, in the order ops yields them. After an
// operation fails, the later ones on its document are not sent
// (ErrHeldBack).
//
// It calls done, if not nil, exactly once for every element of ops that
// Feed took (whose yield returned true): with the error ops yielded with
// it, or with the Result and the *Error (or nil) of the operation. done
// is called from one goroutine at a time, never concurrently, with the
// operations on each document in the order ops yielded them, and never
// with a lock of the Client held, so it may call any of its methods; the
// feed waits while it runs. An operation written to Config.Failed or
// Config.Unknown is written there before done is called for it, on the
// same goroutine: a caller that keeps a checkpoint (package resume) can
// take the files' sizes in done as covering every operation done so far.
// An element that ops yields with an *OperationError, or an error of its
// own, is handed to done and the reading goes on; an *InputError (broken
// input) ends the reading. An iterator that wants the feed to end stops
// yielding.
//
// When ctx ends, Feed stops reading ops (the next yield returns false),
// sends no new request, gives the requests on the wire Config.Grace to be
// answered, and cancels the rest; the operations never sent end with
// ErrNotSent. Feed returns nil exactly when every element of ops was read
// and acknowledged; otherwise its error says how many were not. A Client
// runs one Feed at a time; the same Operation values may be fed by several
// Clients at once (one input copied to two clusters), each keeping its own
// state of them.
func (c *Client) Feed(ctx context.Context, ops iter.Seq2[Operation, error], done func(Operation, Result, error)) error {
	c.mu.Lock()
	switch {
	case c.feeding:
		c.mu.Unlock()
		return errors.New("feed: Feed called while another Feed of the client runs")
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	}
	c.feeding = true
	c.sends.Add(1)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.feeding = false
		c.mu.Unlock()
		c.sends.Done()
	}()
	res := c.newRun(ctx, done).feed(ctx, ops)
	c.mu.Lock()
	c.last = &res
	c.mu.Unlock()
	if res.Complete() {
		return nil
	}
	cause := res.stopped
	if cause == nil && ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	msg := fmt.Sprintf("feed: %d of %d elements not acknowledged", res.failed, res.elements)
	if res.unread.line > 0 {
		msg += ", and " + res.unreadText() + " not read"
	}
	if cause != nil {
		return fmt.Errorf("%s: %w", msg, cause)
	}
	return errors.New(msg)
}

// Counts returns the client's counts so far, since New: its Sends' and
// Feeds' operations, the requests on the wire, and the first endpoint's
// limit; Elapsed and Rate are zero.
//
// Stats has the same counts and more (by how operations ended, the time
// paused), for metrics; Counts is what a progress line shows.
func (c *Client) Counts() Progress { return c.snapshot() }

// Report returns the report of the last Feed that ended: its counts, the
// state of its limiter, budget and breaker, and what it wrote. Before a
// Feed has ended, it reports the client's Sends so far.
func (c *Client) Report() Report {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil {
		return *last
	}
	var res Report
	k := &c.total
	res.ok, res.failed, res.unknown = k.ok.Load(), k.failed.Load(), k.unknown.Load()
	res.notFound, res.condFailed, res.heldBack = k.notFound.Load(), k.condFailed.Load(), k.heldBack.Load()
	res.refusals = c.refusals.Load()
	c.fillReport(&res)
	res.counts = c.snapshot()
	return res
}

// Send sends o, waiting until it is acknowledged or has failed, through
// the same layers as Feed: the limiter, the breaker, the budget and the
// retry rules that depend on whether o is safe to repeat. The Sends on
// one document id go out one at a time, in the order they began. It
// returns a nil error exactly when o was acknowledged: a 2xx, a 412 to an
// operation with a condition (or an update), or a 404 for a remove;
// otherwise an *Error.
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
	op.turn = make(chan struct{})
	if turn, _ := c.queues.join(op); !turn { // a Send is never held back
		select {
		case <-op.turn:
		case <-ctx.Done():
			if c.queues.quit(op) {
				return Result{}, &Error{Err: context.Cause(ctx)}
			}
		}
	}
	// A Send's failure holds nothing back.
	defer c.handOn(op, false)
	if ctx.Err() != nil { // its turn came as its context ended
		return Result{}, &Error{Err: context.Cause(ctx)}
	}
	if c.sendSlots != nil { // a fixed concurrency: no limiter to pace the Sends
		select {
		case c.sendSlots <- struct{}{}:
			defer func() { <-c.sendSlots }()
		case <-ctx.Done():
			return Result{}, &Error{Err: context.Cause(ctx)}
		}
	}
	out := c.sendOp(ctx, ctx, nil, op)
	return out.res, c.finish(nil, out)
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
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.sends.Wait()
	c.transport.CloseIdleConnections()
	return nil
}

// enter counts a Send or Feed in, and reports false if c is closed.
func (c *Client) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.sends.Add(1)
	return true
}
