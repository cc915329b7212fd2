package feed

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/seed32e55400/retries"
)

// opKey is the context key of an operation's *opState.
type opKey struct{}

// opState is one operation being sent, and its context: that ends when
// the operation is halted (its feed stops or is interrupted, its Fence's
// Lifetime ends, an outage outlasts MaxOutage), or its Config.Timeout
// runs out, so that it waits no longer and sends no new request. Its
// requests go on the wire under contexts of their own, children of wire
// (its Feed's sendCtx, or a Send's context): a halt, or a move to another
// endpoint, never abandons a request written while it may still be
// applied; the operation ends once that request's answer is back, as the
// retrying clients see the operation's context ended.
type opState struct {
	context.Context // the operation's; its Value finds the opState
	cancel          context.CancelCauseFunc
	wire            context.Context         // the parent of its requests' contexts
	onWire          atomic.Pointer[request] // its request on the wire, if any, for its timeout to end

	attempts atomic.Int32
	// maybeApplied is set when a request may have been applied though the
	// operation was not acknowledged: it got no response and was not
	// refused at its dial, or a 500, 502 or 504 came back.
	maybeApplied atomic.Bool
	run          *run       // the operation's Feed; nil for a Send
	op           *operation // the operation
	fence        Fence
	// failedOn are the endpoints on which the operation used up its
	// attempts and that it left for another (see detour); only the
	// goroutine that sends it uses it.
	failedOn []*endpoint
	redials  int      // rounds of attempts begun again after a refused connection or an outage (see redial, outlast)
	afterAck bool     // it went round again once its endpoint acknowledged another after its failure (see outlast)
	timeout  deadline // its place in Client.opTimeouts
}

// newOpState returns the state of op, of run r (nil for a Send), under ctx,
// whose requests go out under wire.
func newOpState(ctx, wire context.Context, r *run, op *operation, fence Fence) *opState {
	st := &opState{wire: wire, run: r, op: op, fence: fence}
	st.Context, st.cancel = context.WithCancelCause(ctx)
	return st
}

// Value returns s for opKey, and ctx's values otherwise.
func (s *opState) Value(key any) any {
	if key == (opKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// unknown reports whether op, whose state is st, is not safe to repeat and
// a request of it may have been applied: then it is never sent again (not
// on another endpoint, not on another round), and if it fails its outcome
// is unknown.
func (st *opState) unknown(op *operation) bool { return !op.safe && st.maybeApplied.Load() }

// expire ends the operation, its request on the wire included: its
// Config.Timeout ran out.
func (s *opState) expire(cause error) {
	s.cancel(cause)
	if rq := s.onWire.Load(); rq != nil {
		rq.cancel(cause)
	}
}

// sendOp sends op, of run r or of a Send (r nil), under ctx, its requests
// under wire (see opState), to an endpoint through the retrying clients,
// moving it to another when its endpoint fails it (see detour and
// redial), and returns what came of it, to finish.
func (c *Client) sendOp(ctx, wire context.Context, r *run, op *operation) outcome {
	var handed func()
	if op.permit != (retries.Permit{}) {
		ctx, handed = retries.HandPermit(ctx, op.permit)
		op.permit = retries.Permit{}
	}
	st := newOpState(ctx, wire, r, op, c.cfg.Fence)
	ctx = st
	if r == nil {
		c.sending(st, true)
	}
	stopLife := st.lifetime()
	timed := c.cfg.Timeout > 0
	if timed {
		c.opTimeouts.track(&st.timeout, st)
	}
	// One defer for all: with more, Go no longer open-codes the
	// function's defers (at most 15 returns × defers), which cost the
	// feed 8 % (BenchmarkFeed, HTTP/1.1).
	defer func() {
		if timed {
			c.opTimeouts.untrack(&st.timeout)
		}
		if stopLife != nil {
			stopLife()
		}
		if r == nil {
			c.sending(st, false)
		}
		if handed != nil {
			handed()
		}
		st.cancel(nil)
	}()
	if !op.safe && c.cfg.BeforeUnsafe != nil {
		if err := c.cfg.BeforeUnsafe(ctx, op.pub); err != nil {
			switch {
			case errors.Is(err, ErrNotSent): // the caller keeps it
				return c.end(r, op, st, verdict{how: endKept, cause: err})
			case ctx.Err() == nil:
				st.maybeApplied.Store(true) // by an earlier feed
			default:
				err = context.Cause(ctx)
			}
			return c.end(r, op, st, verdict{how: endFailed, cause: err})
		}
	}
	for {
		e, stay, leave := c.endpoints[0], ctx, func() {}
		if len(c.endpoints) > 1 { // else there is nowhere else to go
			e = c.route(st.failedOn)
			stay, leave = e.within(ctx)
		}
		e.sent.Add(1)
		e.ops.Add(1)
		v := c.sendTo(stay, e, op, st)
		leave()
		e.ops.Add(-1)
		switch {
		case !v.moved:
			return c.end(r, op, st, v)
		case ctx.Err() != nil: // the operation's own context ended as it moved
			return c.end(r, op, st, verdict{how: endFailed, cause: context.Cause(ctx)})
		}
	}
}

// lifetime has the operation halted when its Fence's Lifetime ends, as
// if Admit had refused it then, and returns what undoes that; nil without
// a Lifetime.
func (st *opState) lifetime() func() bool {
	if st.fence == nil {
		return nil
	}
	life := st.fence.Lifetime(st.op.pub)
	if life == nil {
		return nil
	}
	return context.AfterFunc(life, func() { st.cancel(&fenceError{context.Cause(life)}) })
}

// verdict is what one stay of an operation on an endpoint came to.
type verdict struct {
	how    ending // endAcked or endFailed
	moved  bool   // it goes to an endpoint again, and is not finished
	status int    // the last response's, or 0
	cause  error  // with endFailed, why
	msg    string // the server's message with an answer that is not a 2xx
	trace  string
}

// end returns the outcome of op, which ended with v. An operation that
// failed because the feed stopped before a request of it went out is not
// sent: it is told at the end, in input order (later); one not safe to
// repeat whose request may have been applied has an unknown outcome.
func (c *Client) end(r *run, op *operation, st *opState, v verdict) outcome {
	res := Result{Status: v.status, Attempts: int(st.attempts.Load()), Message: v.msg, Trace: v.trace}
	how := v.how
	if how == endFailed {
		// Declared here, not in the if above: the target escapes, and an
		// acknowledged operation should not pay its allocation.
		if fe := (*fenceError)(nil); errors.As(v.cause, &fe) {
			v.cause = fe.err // refused before a request, or halted as it waited
			if errors.Is(fe.err, ErrNotSent) {
				how = endKept
			}
		}
	}
	if how == endFailed {
		if r != nil && res.Attempts == 0 && r.ctx.Err() != nil && errors.Is(v.cause, stopCause(r.ctx)) {
			r.addUnsent(op)
			return outcome{op: op, how: endNotSent, res: res, later: true}
		}
		if st.unknown(op) {
			how = endUnknown
		}
	}
	var elem Operation
	if r != nil {
		elem = op.pub
	}
	return outcome{op: op, elem: elem, how: how, res: res, cause: v.cause}
}

// sendTo sends op to e, and says what came of it: acknowledged, failed,
// or moved away to be sent again (see detour and redial).
func (c *Client) sendTo(ctx context.Context, e *endpoint, op *operation, st *opState) verdict {
	req, err := c.newRequest(ctx, e, op)
	if err != nil {
		return verdict{how: endFailed, cause: err}
	}
	client := e.safeOps
	if !op.safe {
		client = e.unsafeOps
	}
	seen := e.word.Load() // the word awaited as the request goes out, if any (see acked)
	resp, err := client.RoundTrip(req)
	if err != nil {
		return c.classifyError(ctx, e, op, st, err)
	}
	if resp.StatusCode/100 == 2 {
		// Nothing in a success is read: drain it (bounded) so that the
		// connection is reused, without a buffer of its own.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
		e.acked(seen)
		return verdict{how: endAcked, status: resp.StatusCode}
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	v := verdict{how: endFailed, status: resp.StatusCode, msg: message(data, c.wire.secrets)}
	if c.cfg.TraceLevel > 0 {
		v.trace = trace(data, c.wire.secrets)
	}
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed && op.condition == "" && op.kind != Update:
		// A put or a remove without a condition cannot fail one: the
		// answer says something is wrong (a proxy's, or a route's), and
		// the operation was not applied.
		v.cause = fmt.Errorf("%s to an operation without a condition: %s", resp.Status, v.msg)
	case resp.StatusCode == http.StatusPreconditionFailed, // an answer: the condition was not met
		resp.StatusCode == http.StatusNotFound && op.kind == Remove: // an answer: there was nothing to remove
		v.how = endAcked
		e.acked(seen)
	case c.again(ctx, e, op, st, resp, nil):
		return verdict{moved: true}
	default:
		msg := v.msg
		if v.trace != "" {
			msg += "; trace: " + v.trace
		}
		v.cause = fmt.Errorf("%s: %s", resp.Status, msg)
		if r := st.run; r != nil {
			r.noteRefusal(op, resp.StatusCode, v.msg, data)
		}
	}
	return v
}

// classifyError says what an error from the retrying clients comes to:
// a move to an endpoint again, or a failure.
func (c *Client) classifyError(ctx context.Context, e *endpoint, op *operation, st *opState, err error) verdict {
	if errors.Is(err, errMoved) { // nothing of it was on the wire when it moved
		return verdict{moved: true}
	}
	// Refused by the fence before a request, or halted by its Lifetime
	// as it waited: end (kept, when the refusal matches ErrNotSent).
	if fe := (*fenceError)(nil); errors.As(err, &fe) || errors.As(context.Cause(ctx), &fe) {
		return verdict{how: endFailed, cause: fe}
	}
	// An outage that outlasted MaxOutage, or a TLS error elsewhere, is the
	// whole story; a timeout is named by the error itself (the context's
	// cause).
	cause := context.Cause(ctx)
	if isFeedStop(cause) {
		err = cause
	}
	if isTLSError(err) {
		c.stopOnTLS(st.run, err)
	}
	status := 0
	var refused *refusedAfter
	if errors.As(err, &refused) {
		status = refused.status
	}
	if c.again(ctx, e, op, st, nil, err) {
		return verdict{moved: true}
	}
	return verdict{how: endFailed, status: status, cause: err}
}

// again decides what follows a round of attempts of op on e that ended in
// a failure, its last response v (or nil) and err: true, the operation
// goes round again; false, the failure stands. In order:
//
//   - with several endpoints, another whose breaker is closed and that has
//     not failed it (detour);
//   - after a connection that could not be made, e again, at most
//     maxRedials rounds (redial);
//   - when its retry rule would send it again, e again once e's next word
//     says the failure was an outage's, or, once, that e answers (outlast);
//   - else the failure stands.
//
// None goes round for an operation whose own context ended, nor for one
// not safe to repeat whose request may have been applied.
func (c *Client) again(ctx context.Context, e *endpoint, op *operation, st *opState, v any, err error) bool {
	return c.detour(ctx, e, op, st, v, err) || c.redial(ctx, op, st, err) || c.outlast(ctx, e, op, st, v, err)
}

// newRequest returns the request of op to e: its method, URL with the
// feed's parameters, headers and body, gzipped as Config.Compression says.
func (c *Client) newRequest(ctx context.Context, e *endpoint, op *operation) (*http.Request, error) {
	var body io.Reader
	header := e.header[noBody]
	if op.body != nil {
		b, gzipped := wireBody(op.body, c.cfg.Compression)
		body = bytes.NewReader(b)
		header = e.header[jsonBody]
		if gzipped {
			header = e.header[gzipBody]
		}
	}
	target := e.base + op.path
	switch {
	case c.params == "":
	case strings.Contains(op.path, "?"):
		target = e.base + op.path + "&" + c.params
	default:
		target = e.base + op.path + "?" + c.params
	}
	req, err := http.NewRequestWithContext(ctx, op.kind.method(), target, body)
	if err != nil {
		return nil, err
	}
	req.Header = header
	if h := c.cfg.Header.Get("Host"); h != "" {
		req.Host = h
	}
	return req, nil
}

// The headers of an endpoint's requests, by their body.
const (
	noBody = iota
	jsonBody
	gzipBody
)

// requestHeaders returns the headers of the requests to the endpoint at
// u, by their body (noBody, jsonBody, gzipBody): Config.Header, and the
// basic authorization of u's user, if any, as an http.Client would add.
// Every request shares them: neither the transports nor the retrying
// clients modify a request's header (a retry sends a clone).
func requestHeaders(h http.Header, u *url.URL) [3]http.Header {
	base := h.Clone()
	if base == nil {
		base = http.Header{}
	}
	if u.User != nil && base.Get("Authorization") == "" {
		pw, _ := u.User.Password()
		auth := u.User.Username() + ":" + pw
		base.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(auth)))
	}
	json := base.Clone()
	json["Content-Type"] = []string{"application/json"}
	gz := json.Clone()
	gz["Content-Encoding"] = []string{"gzip"}
	return [3]http.Header{noBody: base, jsonBody: json, gzipBody: gz}
}

// tlsStop is the cause of every operation's end after a TLS error.
type tlsStop struct{ err error }

func (e *tlsStop) Error() string { return "stopped by a TLS error: " + e.err.Error() }

// stopOnTLS ends the feed of r, if any, at the first TLS error: every
// later attempt would fail the same way.
func (c *Client) stopOnTLS(r *run, err error) {
	if r == nil {
		r = c.running.Load()
	}
	if r == nil {
		return
	}
	if e := (&tlsStop{err: err}); r.stop(e, true) {
		c.out.logf("stopping: TLS: %v\n", err)
		c.event(slog.LevelError, "feed: stopping: TLS", slog.String("error", err.Error()))
	}
}
