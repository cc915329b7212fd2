package feed

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// An operation's life, in the order it goes: sendOp owns it from the
// dispatch to its outcome, with its stays on endpoints (sendTo), each
// stay's request (newRequest) and that request's attempts on the wire
// (opWire, request) under the retrying clients, then what a round's
// failure comes to (classifyError, again) and its outcome (end). The
// timeouts queue at the end holds its deadline and its requests'.

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
	// attempts and that it left for another (see again); only the
	// goroutine that sends it uses it.
	failedOn []*endpoint
	redials  int      // rounds of attempts begun again after a refused connection or an outage (see again)
	afterAck bool     // it went round again once its endpoint acknowledged another after its failure (see heard)
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
// moving it to another when its endpoint fails it (see again),
// and returns what came of it, to finish.
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

// sending adds st, a Send's, to those being sent (in true) or takes it out.
func (c *Client) sending(st *opState, in bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !in {
		delete(c.live, st)
		return
	}
	if c.live == nil {
		c.live = map[*opState]struct{}{}
	}
	c.live[st] = struct{}{}
}

// haltSends halts every Send being sent with cause.
func (c *Client) haltSends(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for st := range c.live {
		st.cancel(cause)
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

// sendTo sends op to e, and says what came of it: acknowledged, failed,
// or moved away to be sent again (see again).
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

// gzippers are reused gzip writers, at gzip.BestSpeed: feed bodies are JSON,
// which the fastest level already shrinks several times.
var gzippers = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// wireBody returns the body to send for op under c, and whether it is
// gzipped. It is computed once per operation: every attempt, retries
// included, sends the same bytes.
func wireBody(body []byte, c Compression) ([]byte, bool) {
	if c == CompressNone || c == CompressAuto && len(body) <= compressAbove {
		return body, false
	}
	var b bytes.Buffer
	b.Grow(len(body) / 3)
	zw := gzippers.Get().(*gzip.Writer)
	zw.Reset(&b)
	_, _ = zw.Write(body) // a bytes.Buffer does not fail
	_ = zw.Close()
	gzippers.Put(zw)
	return b.Bytes(), true
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

// opWire is the base RoundTripper of the retrying Transports: it sends
// each request of an operation under a context of its own (see opState),
// within Config.AttemptTimeout, through the connection pool, which counts
// what goes on the wire.
type opWire struct {
	pool     *connPool
	attempts *timeouts // Config.AttemptTimeout's; nil without one
}

func (t opWire) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(opKey{}).(*opState)
	if st == nil {
		return nil, errors.New("feed: a request without an operation")
	}
	if st.fence != nil {
		if err := st.fence.Admit(req.Context(), st.op.pub); err != nil {
			return nil, &fenceError{err}
		}
	}
	rq := &request{op: st, n: &t.pool.s.responseBytes}
	rq.ctx, rq.cancel = context.WithCancelCause(st.wire)
	// Stored before the look at the operation's context, which its
	// timeout ends before it looks here: one of the two sees the other.
	st.onWire.Store(rq)
	if req.Context().Err() != nil { // halted, or moved: nothing goes out
		rq.leave()
		return nil, context.Cause(req.Context())
	}
	if st.run != nil {
		st.run.requestOut()
	}
	if st.attempts.Add(1) > 1 {
		t.pool.s.retries.Add(1)
	}
	if t.attempts != nil {
		t.attempts.track(&rq.deadline, rq)
	}
	resp, load, err := t.pool.roundTrip(req.WithContext(rq.ctx))
	if t.attempts != nil {
		t.attempts.untrack(&rq.deadline)
	}
	if err != nil {
		timedOut := context.Cause(rq.ctx) == errAttemptTimeout
		rq.leave()
		if !isDialError(err) {
			st.maybeApplied.Store(true)
		}
		if timedOut {
			return nil, &attemptTimeout{d: t.attempts.timeout}
		}
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		st.maybeApplied.Store(true)
	}
	rq.ReadCloser, rq.load = resp.Body, load
	resp.Body = rq
	return resp, nil
}

// request is a request of an operation on the wire, and its response's
// body: its context ends when the body is read to its end or closed, when
// Config.AttemptTimeout runs out before the response header, when the
// operation's Config.Timeout runs out, or when the wire's context ends.
type request struct {
	io.ReadCloser // the response body
	ctx           context.Context
	cancel        context.CancelCauseFunc
	op            *opState
	n             *atomic.Int64 // the response bytes read
	load          *atomic.Int64 // its transport's load (see connPool.roundTrip); nil before a response
	deadline      deadline      // its place in opWire.attempts
	left          atomic.Bool
}

// expire ends the request: its Config.AttemptTimeout ran out.
func (rq *request) expire(cause error) { rq.cancel(cause) }

func (rq *request) Read(p []byte) (int, error) {
	n, err := rq.ReadCloser.Read(p)
	rq.n.Add(int64(n))
	if err != nil {
		rq.leave()
	}
	return n, err
}

func (rq *request) Close() error {
	err := rq.ReadCloser.Close()
	rq.leave()
	return err
}

// leave ends the request, once: it is off the wire.
func (rq *request) leave() {
	if rq.left.CompareAndSwap(false, true) {
		rq.op.onWire.CompareAndSwap(rq, nil)
		rq.cancel(nil)
		if rq.load != nil {
			rq.load.Add(-1)
		}
	}
}

// errAttemptTimeout is the cause of a request's end when
// Config.AttemptTimeout ran out before its response header.
var errAttemptTimeout = errors.New("attempt timed out")

// attemptTimeout is the error of a request that ran out of
// Config.AttemptTimeout: it matches retries.ErrAttemptTimeout (the
// breaker counts it) and reports a timeout, as the retrying clients'
// own did.
type attemptTimeout struct{ d time.Duration }

func (e *attemptTimeout) Error() string        { return "attempt timed out after " + e.d.String() }
func (e *attemptTimeout) Is(target error) bool { return target == retries.ErrAttemptTimeout }
func (e *attemptTimeout) Timeout() bool        { return true }

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
	return outcome{op: op, how: how, res: res, cause: v.cause}
}

// requestOut is called as each request of the run goes out. At the first,
// it starts the watch that stops the feed if no request has had a
// response Config.FirstResponse later: a wrong host or port, or a server
// that never answers. (A feed waiting for its input sends nothing, and is
// not stopped.)
func (r *run) requestOut() {
	c := r.c
	if c.cfg.FirstResponse <= 0 || r.firstOut.Load() || !r.firstOut.CompareAndSwap(false, true) {
		return
	}
	// A watch started after endWatch (a request of the feed's end) does
	// nothing.
	r.watch.Store(time.AfterFunc(c.cfg.FirstResponse, func() {
		if !r.watchEnd.Load() && c.wire.responses.Load() == r.responsesAt {
			r.stopSetup(fmt.Sprintf("no request got a response in %v (%s): check -url", c.cfg.FirstResponse, c.wire.failure()))
		}
	}))
}

// endWatch ends the watch of requestOut.
func (r *run) endWatch() {
	r.watchEnd.Store(true)
	if t := r.watch.Load(); t != nil {
		t.Stop()
	}
}
