package retries

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Transport is an [http.RoundTripper] that sends every request under a
// [Policy]: it makes one round trip through its base RoundTripper per
// attempt and retries the outcomes that the policy retries. Plug it into an
// [http.Client] once:
//
//	client := &http.Client{Transport: retries.NewTransport(nil, retries.DocV1)}
//
// Transports nest: pyvespa's document/v1 client is [DocV1] around
// [Throttle], and each outer attempt runs the inner Transport afresh:
//
//	inner := retries.NewTransport(nil, retries.Throttle)
//	client := &http.Client{Transport: retries.NewTransport(inner, retries.DocV1)}
//
// Every request whose body can be replayed is retried, whatever its
// method, unless [WithIdempotentOnly]; [Transport.RoundTrip] says what
// comes back.
//
// The zero Transport is usable: it sends requests through
// [http.DefaultTransport] under the zero Policy, so each request is sent
// once.
//
// A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	base           http.RoundTripper // nil means http.DefaultTransport
	policy         Policy
	idempotentOnly bool
	attemptTimeout time.Duration
	timeoutErr     *attemptTimeout // the error of an attempt that ran out of time
}

// TransportOption configures a [Transport] in [NewTransport].
type TransportOption func(*Transport)

// NewTransport returns a Transport that sends requests through base under
// p. A nil base means [http.DefaultTransport].
func NewTransport(base http.RoundTripper, p Policy, opts ...TransportOption) *Transport {
	t := &Transport{base: base, policy: p}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	return t
}

// WithIdempotentOnly makes a [Transport] retry only requests with a method
// that RFC 9110 calls idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE)
// and requests with an Idempotency-Key or X-Idempotency-Key header. Other
// requests, such as a POST, are sent once, and their outcome comes back as
// the policy gives it when it stops after one attempt.
//
// This is wider than the rule net/http follows when it replays a request
// on a broken connection of its own, which leaves out PUT and DELETE: it
// replays GET, HEAD, OPTIONS and TRACE, and requests with either header.
func WithIdempotentOnly() TransportOption {
	return func(t *Transport) { t.idempotentOnly = true }
}

// WithAttemptTimeout gives each attempt of a [Transport] its own time limit
// d, counted from the start of the attempt until the response header has
// arrived. An attempt that runs out of time fails with an error that matches
// [ErrAttemptTimeout] and reports Timeout() == true. Policies that retry any
// error ([Query], [DocV1], [ControlPlane], [URLValidation]) retry it;
// [IsConnectionError] does not count it, so add it to a policy that retries
// only connection errors:
//
//	p := retries.SyncRequest.Copy(retries.WithRetry(retries.RetryAny(
//		retries.SyncRequest.Retry(), retries.RetryIfErrorIs(retries.ErrAttemptTimeout))))
//
// The limit stops once the header has arrived: reading the body of the
// response RoundTrip returns is bounded only by the caller's context, since a
// response already handed to the caller can no longer be retried. The
// attempt's context lives until that body is closed or read to the end.
// The default discard step ([WithDiscard]) keeps within d too. The caller's
// own deadline ending is never retried. A d of 0 means no limit.
//
// WithAttemptTimeout panics if d is negative.
func WithAttemptTimeout(d time.Duration) TransportOption {
	checkNonNegative("WithAttemptTimeout", "d", d)
	return func(t *Transport) { t.attemptTimeout, t.timeoutErr = d, &attemptTimeout{d: d} }
}

// ErrBodyNotReplayable is matched (with [errors.Is]) by the error of a
// [Transport] that did not retry a request because its body has no
// [http.Request.GetBody] to replay it with ([http.NewRequest] sets one for
// a [*bytes.Buffer], [*bytes.Reader] or [*strings.Reader] body). Such a
// request is sent once, with its own body. An outcome the policy would not
// have retried comes back as the policy gives it after one attempt; one it
// would have retried becomes an error that matches ErrBodyNotReplayable and
// the attempt's error, or a [*StatusError] made from the response, which is
// closed.
var ErrBodyNotReplayable = errors.New("retries: request body cannot be replayed (Request.GetBody is nil)")

// ErrAttemptTimeout is matched (with [errors.Is]) by the error of an attempt
// that ran out of the time [WithAttemptTimeout] gives it.
var ErrAttemptTimeout = errors.New("retries: attempt timed out")

// TransportRequest returns the method and the URL, its password replaced
// by "xxxxx", of the request that a [Transport] is sending under ctx: the
// context its policy's hooks receive. ok is false for any other context.
func TransportRequest(ctx context.Context) (method, url string, ok bool) {
	if c, isRT := ctx.Value(roundTripKey{}).(*roundTripCtx); isRT {
		return c.method, c.url, true
	}
	return "", "", false
}

// TransportAttempt returns the number of the attempt, from 1, that the
// request with context ctx is, as a [Transport] sends it to its base
// RoundTripper: 1 for a first attempt, n for its (n−1)-th retry. With two
// Transports, the inner one's count wins where it retried. It is what a
// base RoundTripper needs to mark a resend, as OpenTelemetry's
// http.request.resend_count (TransportAttempt − 1) does.
func TransportAttempt(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// attemptKey is the context key of a retry's attempt number.
type attemptKey struct{}

// roundTripKey is the context key of a *roundTripCtx, which answers it
// with itself.
type roundTripKey struct{}

// roundTripCtx is the context of a call to RoundTrip whose policy has a
// hook that receives one (before, after, before sleep): the request's, in
// which TransportRequest finds the request. Any other policy gets the
// request's own context, since nothing else sees it, at no allocation.
type roundTripCtx struct {
	context.Context
	method, url string
}

func (c *roundTripCtx) Value(key any) any {
	if key == (roundTripKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// connClosed is the error of a round trip whose connection closed before a
// response: the io.EOF of a base RoundTripper. It still matches io.EOF,
// and [IsConnectionError] knows it for what it is, which a bare io.EOF
// (the end of any reader) is not.
type connClosed struct{ err error }

func (e *connClosed) Error() string { return e.err.Error() }
func (e *connClosed) Unwrap() error { return e.err }

// notReplayed is the error of a request that was not retried because its
// body cannot be replayed: it matches ErrBodyNotReplayable and cause.
type notReplayed struct{ cause error }

func (e *notReplayed) Error() string {
	msg := "<nil>"
	se, isStatus := e.cause.(*StatusError)
	switch {
	case isStatus:
		msg = se.Status
		if msg == "" {
			msg = http.StatusText(se.StatusCode)
		}
	case e.cause != nil:
		msg = strings.TrimPrefix(e.cause.Error(), "retries: ")
	}
	return "retries: request body cannot be replayed (Request.GetBody is nil), so it was sent once and not retried: " + msg
}

func (e *notReplayed) Unwrap() []error { return []error{ErrBodyNotReplayable, e.cause} }

// Timeout reports whether the attempt's error reports a timeout.
func (e *notReplayed) Timeout() bool { return isTimeout(e.cause) }

// attemptTimeout is the error of an attempt that ran out of time.
type attemptTimeout struct{ d time.Duration }

func (e *attemptTimeout) Error() string        { return "attempt timed out after " + e.d.String() }
func (e *attemptTimeout) Is(target error) bool { return target == ErrAttemptTimeout }

// Timeout reports true, as the timeouts of net and net/http do.
func (e *attemptTimeout) Timeout() bool { return true }

// RoundTrip sends req under the Transport's policy and returns a response
// or an error, never both and never neither, as [http.RoundTripper] asks.
// The first attempt sends req itself, with its own body, or a shallow copy
// ([http.Request.WithContext]) when it needs a context of its own (an
// attempt timeout, or hooks that look for the request); every retry sends a
// clone of req with a body from [http.Request.GetBody] (a body without one
// is sent once: see [ErrBodyNotReplayable]). req itself is never modified,
// and its Body is closed. A response the policy retries
// is released by its discard step ([WithDiscard]); the one returned is
// untouched. When the policy gives up, RoundTrip returns what its exhaustion
// rule gives, the last response alone if that rule returns one, an error
// alone otherwise. Errors are the base RoundTripper's, unnamed, as
// [http.Transport]'s are; hooks find the request with [TransportRequest].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil || req.URL == nil {
		if req != nil && req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("retries: Transport.RoundTrip: nil Request or Request.URL")
	}
	r := &roundTrip{t: t, req: req, ctx: req.Context()}
	if p := &t.policy; p.before != nil || p.after != nil || p.beforeSleep != nil {
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		r.ctx = &roundTripCtx{Context: r.ctx, method: method, url: req.URL.Redacted()}
		r.wrapped = true
	}
	if o := t.policy.observer(); o != nil && o.Start != nil {
		r.wrapped = true // attempts run under the context Start returns
	}
	defer r.closeBody()
	switch {
	case hasBody(req) && req.GetBody == nil:
		return r.once(true)
	case t.idempotentOnly && !isIdempotent(req):
		return r.once(false)
	}
	resp, err := DoValue(r.ctx, t.policy, r.attempt)
	return r.finish(resp, err)
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, when it has such a method (as [*http.Transport] does).
// [http.Client.CloseIdleConnections] calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.baseRT().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// baseRT returns the base RoundTripper, read where it is used so that the
// zero Transport works.
func (t *Transport) baseRT() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := req.Header["X-Idempotency-Key"]
	return ok
}

// roundTrip is the state of one call to RoundTrip.
type roundTrip struct {
	t       *Transport
	req     *http.Request
	ctx     context.Context // req's, or a *roundTripCtx around it for the hooks
	wrapped bool            // attempts run under a context of their own: send a copy
	sent    int             // the attempts made
	ownBody bool            // the caller's Body was handed to the base RoundTripper
	lastErr error           // the last attempt's error, nil after a response
}

// closeBody closes the caller's body unless the base RoundTripper took it:
// only a first attempt sends it, so it is never read twice.
func (r *roundTrip) closeBody() {
	if !r.ownBody && r.req.Body != nil {
		_ = r.req.Body.Close()
	}
}

// attempt makes one round trip through the base RoundTripper.
func (r *roundTrip) attempt(ctx context.Context) (*http.Response, error) {
	resp, err := r.try(ctx)
	r.lastErr = err
	return resp, err
}

func (r *roundTrip) try(ctx context.Context) (*http.Response, error) {
	r.sent++
	first := r.sent == 1
	if first && r.t.attemptTimeout == 0 && !r.wrapped {
		// The request can go as it is: the attempt needs no context of
		// its own, and the body is the caller's, unread.
		r.ownBody = true
		return r.outcome(r.t.baseRT().RoundTrip(r.req))
	}
	actx, cancel := ctx, context.CancelCauseFunc(nil)
	if r.t.attemptTimeout > 0 {
		actx, cancel = context.WithCancelCause(ctx)
	}
	if !first {
		// A retry's request says which attempt it is, for the base
		// RoundTripper (TransportAttempt): one allocation per retry.
		actx = context.WithValue(actx, attemptKey{}, r.sent)
	}
	var req *http.Request
	switch {
	case first:
		// A shallow copy with the attempt's context, and the caller's
		// body: the base RoundTripper takes it (it closes it). A retry
		// sends a clone with a body from GetBody, so the caller's body
		// is never read twice.
		req = r.req.WithContext(actx)
		r.ownBody = true
	case !hasBody(r.req):
		req = r.req.Clone(actx)
	default: // a retry has a GetBody: once sends a body without one
		body, err := r.req.GetBody()
		if err != nil {
			if cancel != nil {
				cancel(nil)
			}
			return nil, backoff.Permanent(&getBodyError{err})
		}
		req = r.req.Clone(actx)
		req.Body = body
	}
	base := r.t.baseRT()
	if cancel == nil {
		return r.outcome(base.RoundTrip(req))
	}

	// One object per timed attempt: the timer's callback, and the body
	// that ends the attempt's context when the response is done with.
	a := &cancelBody{cancel: cancel, limit: r.t.attemptTimeout, timeout: r.t.timeoutErr}
	timer := time.AfterFunc(r.t.attemptTimeout, a.expire)
	resp, err := base.RoundTrip(req)
	if fired := !timer.Stop(); fired && ctx.Err() == nil {
		// The attempt ran out of time, even if a response arrived at the
		// same instant: its context is canceled, so its body is unusable.
		cancel(nil)
		if resp != nil {
			discardBody(resp)
		}
		return nil, r.t.timeoutErr
	}
	if err != nil || resp == nil || resp.Body == nil {
		cancel(nil)
		return r.outcome(resp, err)
	}
	// The attempt's context must outlive RoundTrip: the caller reads the
	// body under it. It ends when the body is closed or read to the end.
	a.rc = resp.Body
	resp.Body = a
	if w, ok := a.rc.(io.ReadWriteCloser); ok { // a 101 Switching Protocols body
		resp.Body = &cancelBodyRW{cancelBody: a, w: w}
	}
	return resp, nil
}

func hasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// outcome turns the base RoundTripper's result into the attempt's outcome.
func (r *roundTrip) outcome(resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		if resp != nil { // a RoundTripper must not return both; drop the response
			discardBody(resp)
		}
		if inTree(err, io.EOF) {
			err = &connClosed{err}
		}
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("retries: the base RoundTripper returned neither a response nor an error")
	}
	return resp, nil
}

// finish turns DoValue's result into RoundTrip's: a response or an error.
func (r *roundTrip) finish(resp *http.Response, err error) (*http.Response, error) {
	switch {
	case err == nil && resp != nil:
		return resp, nil
	case err == nil: // an exhaustion callback swallowed the last error
		err = r.lastErr
		if err == nil {
			err = errors.New("retries: the policy returned neither a response nor an error")
		}
	case resp != nil:
		discardBody(resp)
	}
	return nil, err
}

// once sends the request in a single attempt, with the policy's hooks and
// exhaustion rule, as if its stop allowed one attempt. With notReplayable,
// an outcome the policy would have retried becomes an error matching
// ErrBodyNotReplayable.
func (r *roundTrip) once(notReplayable bool) (*http.Response, error) {
	stop := r.t.policy.Stop()
	would := false
	p := r.t.policy.Copy(WithStop(StopIf(func(s State) bool {
		would = !stop.Check(s)
		return true
	})))
	resp, err := DoValue(r.ctx, p, r.attempt)
	if !notReplayable || !would {
		return r.finish(resp, err)
	}
	var cause error
	switch {
	case resp != nil:
		cause = newStatusError(resp)
	case err != nil:
		cause = err
		if re, ok := cause.(*RetryError); ok && re.Err != nil {
			cause = re.Err
		}
	default:
		cause = r.lastErr
	}
	if inTree(cause, ErrBodyNotReplayable) {
		return nil, cause // an inner Transport already said why
	}
	return nil, &notReplayed{cause: cause}
}

// getBodyError is the error of a failed Request.GetBody.
type getBodyError struct{ err error }

func (e *getBodyError) Error() string { return "retries: Request.GetBody: " + e.err.Error() }
func (e *getBodyError) Unwrap() error { return e.err }

// cancelBody releases an attempt's context when the body is closed or read
// to the end.
type cancelBody struct {
	rc      io.ReadCloser
	once    sync.Once
	cancel  context.CancelCauseFunc // the attempt's
	limit   time.Duration           // the attempt timeout
	timeout error                   // the cause when the attempt runs out of time
}

// expire ends the attempt's context because it ran out of time.
func (b *cancelBody) expire() { b.cancel(b.timeout) }

// stop ends the attempt's context once the response is done with.
func (b *cancelBody) stop() { b.cancel(nil) }

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.once.Do(b.stop)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.stop)
	return err
}

// abort gives up on the body: canceling the attempt's context ends a
// pending read in any RoundTripper that honours it, and Close ends one in
// net/http's.
func (b *cancelBody) abort() {
	b.once.Do(b.stop)
	_ = b.rc.Close()
}

// discardWait is the attempt timeout: the attempt's budget covers the
// release of the response it produced.
func (b *cancelBody) discardWait() time.Duration { return b.limit }

type cancelBodyRW struct {
	*cancelBody
	w io.Writer
}

func (b *cancelBodyRW) Write(p []byte) (int, error) { return b.w.Write(p) }
