package feed

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
)

// ending is how an element of a Feed, or a Send, ended.
type ending uint8

const (
	endAcked    ending = iota // acknowledged: a 2xx, a 412 but to an unconditional put or remove, a 404 to a remove
	endFailed                 // not acknowledged: written to Config.Failed
	endUnknown                // not safe to repeat and may have been applied: written to Config.Unknown
	endHeldBack               // not sent behind a failed operation on its document: written to Failed
	endNotSent                // the feed stopped before it went out: written to Failed unless Resumable
	endRest                   // read after the feed stopped, to write it to Failed: written, not counted
	endKept                   // Config.BeforeUnsafe or Config.Fence kept it (ErrNotSent): neither written nor counted
	endBadOp                  // an element that is no valid operation (*OperationError): skipped
	endBadInput               // broken input that ends the reading (*InputError)
	endElemErr                // another error ops yielded with an element: the reading goes on
)

// outcome is what became of one element of a Feed or one Send.
type outcome struct {
	op     *operation // nil for an element ops yielded with an error
	elem   Operation  // with op nil: what ops yielded with its error
	how    ending
	res    Result
	cause  error // why it was not acknowledged
	silent bool  // with endRest and endBadOp: already said

	// For the hub of a Feed (see run.hub): later, an operation not sent,
	// told at the end; turn, the operation's turn on its document ends;
	// release, the operation never joined its document's queue.
	later, turn, release bool
}

// element returns what ops yielded, or the Send was given: the Operation
// handed to done.
func (o *outcome) element() Operation {
	if o.op != nil {
		return o.op.pub
	}
	return o.elem
}

// hub is the one place the outcomes of a Feed land while it runs, as the
// results goroutine of Vespa's feed client: it alone finishes them (the
// counts, the -failed files, the log and done), hands the turn on each
// document to the operation after the one that ended (holding it back
// after a failure), and ends their part in the run. Once every
// operation dispatched has ended, feed closes r.results and the hub
// returns; what is told after that (the operations not sent, the rest of
// the input) is finished on feed's own goroutine.
func (r *run) hub() {
	defer close(r.hubDone)
	for o := range r.results {
		if !o.later {
			r.c.finish(r, o)
		}
		switch {
		case o.turn:
			r.c.handOn(o.op, o.how != endAcked && o.how != endKept) // the later operations must not overtake a failure
		case o.release:
			r.release(o.op)
		}
	}
}

// counts are the outcomes of operations, added to only by finish: a
// Client's since New, and a run's for its Feed.
type counts struct {
	ok, failed, notFound, condFailed, badIn, heldBack, unknown atomic.Int64
	read                                                       atomic.Int64 // operations read, bad ones included
}

func (k *counts) add(o *outcome) {
	switch o.how {
	case endAcked:
		k.ok.Add(1)
		switch o.res.Status {
		case http.StatusPreconditionFailed:
			k.condFailed.Add(1)
		case http.StatusNotFound:
			k.notFound.Add(1)
		}
	case endUnknown:
		k.unknown.Add(1)
		k.failed.Add(1)
	case endHeldBack:
		k.heldBack.Add(1)
		k.failed.Add(1)
	case endBadOp:
		k.read.Add(1)
		k.badIn.Add(1)
		k.failed.Add(1)
	case endBadInput:
		k.badIn.Add(1)
		k.failed.Add(1)
	case endFailed, endNotSent, endElemErr:
		k.failed.Add(1)
	}
}

// finish is where every outcome lands: it is the only caller of done, of
// the writers of Config.Failed and Config.Unknown, and of the counts. For a
// Feed it runs on the hub while the feed runs, and on feed's goroutine
// after the hub has returned, so one call at a time; for a Send (r nil), on
// its caller's. No lock of the feed is held, so that done may call any
// method of the Client. It returns the error handed to done: nil exactly
// when the operation was acknowledged.
func (c *Client) finish(r *run, o outcome) error {
	c.total.add(&o)
	if r != nil {
		r.counts.add(&o)
	}
	var err error
	op := o.op
	switch o.how {
	case endAcked:
		if !c.acked.Load() {
			c.acked.Store(true)
		}
	case endFailed:
		err = &Error{Status: o.res.Status, Err: o.cause}
		c.out.logf("failed: %s: %v\n", op.name(), o.cause)
		c.failedOut.write(op)
	case endUnknown:
		err = &Error{Status: o.res.Status, Unknown: true, Err: o.cause}
		c.out.logf("failed: %s: %v; the outcome is unknown: it may have been applied\n", op.name(), o.cause)
		c.unknownOut.write(op)
	case endHeldBack:
		err = &Error{Err: ErrHeldBack}
		c.out.logf("not sent: %s: an earlier operation on the document failed\n", op.name())
		c.failedOut.write(op)
	case endNotSent:
		err = &Error{Err: ErrNotSent}
		if r == nil || !r.c.cfg.Resumable { // a resumable feed's are counted in its last line
			c.out.logf("not sent: %s\n", op.name())
			c.failedOut.write(op)
		}
	case endRest:
		err = &Error{Err: ErrNotSent}
		c.failedOut.write(op)
	case endKept:
		err = &Error{Err: o.cause}
	case endBadOp:
		err = o.cause
		if o.silent {
			c.out.logf("%v (not written)\n", err)
		} else {
			c.out.logf("%v (skipped)\n", err)
		}
	case endBadInput, endElemErr:
		err = o.cause
		c.out.logf("%v\n", err)
	}
	if c.cfg.Logger != nil && o.how != endAcked {
		c.logOutcome(&o, err)
	}
	if r != nil && r.done != nil {
		r.done(o.element(), o.res, err)
	}
	return err
}

// outcomeNames name the endings in Config.Logger's records.
var outcomeNames = [...]string{endAcked: "acknowledged", endFailed: "failed", endUnknown: "unknown", endHeldBack: "heldback",
	endNotSent: "notsent", endRest: "notsent", endKept: "kept", endBadOp: "badinput", endBadInput: "badinput", endElemErr: "failed"}

// logOutcome writes an element not acknowledged to Config.Logger.
func (c *Client) logOutcome(o *outcome, err error) {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("outcome", outcomeNames[o.how]))
	if op := o.op; op != nil {
		attrs = append(attrs, slog.String("id", op.id), slog.String("kind", op.kind.String()))
		if op.line > 0 {
			attrs = append(attrs, slog.Int("line", op.line))
		}
	} else if o.elem.ID != "" {
		attrs = append(attrs, slog.String("id", o.elem.ID))
	}
	if tag := o.element().Tag; tag != nil {
		attrs = append(attrs, slog.Any("tag", tag))
	}
	if o.res.Status != 0 {
		attrs = append(attrs, slog.Int("status", o.res.Status))
	}
	attrs = append(attrs, slog.Int("attempts", o.res.Attempts))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	c.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "feed: not acknowledged", attrs...)
}

// event writes one of the feed's events to Config.Logger, if set.
func (c *Client) event(level slog.Level, msg string, attrs ...slog.Attr) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.LogAttrs(context.Background(), level, msg, attrs...)
	}
}
