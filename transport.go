package retries

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Transport is an [http.RoundTripper] that sends every request under a
// [Policy]: it makes one round trip through its base RoundTripper per
// attempt and retries the outcomes that the policy's predicate retries.
// Plug it into an [http.Client] once:
//
//	client := &http.Client{Transport: retries.NewTransport(nil, retries.DocV1)}
//
// The document/v1 setup of pyvespa, [DocV1] around [Throttle], is two
// Transports, one around the other:
//
//	inner := retries.NewTransport(nil, retries.Throttle)
//	client := &http.Client{Transport: retries.NewTransport(inner, retries.DocV1)}
//
// Every outer attempt runs the inner Transport afresh, so the inner schedule
// starts again at its first wait, and a 429, which the inner layer absorbs,
// never spends one of the outer layer's attempts.
//
// # Attempts
//
// Each attempt sends a clone of the request ([http.Request.Clone]) with the
// caller's context, or a child of it when [WithAttemptTimeout] is set, and
// with a fresh body from [http.Request.GetBody]. The caller's request is
// never modified; its Body is closed, as the RoundTripper contract requires.
// [http.NewRequest] sets GetBody for a body that is a [*bytes.Buffer],
// [*bytes.Reader] or [*strings.Reader].
//
// A request with a body and no GetBody cannot be replayed: it is sent once,
// with its own Body, and never retried, since a body half read by a failed
// attempt cannot be sent again. If the policy would not have retried the
// outcome, that outcome comes back as the policy gives it, as if the policy
// allowed one attempt. If it would have, RoundTrip returns an error that
// matches [ErrBodyNotReplayable] and the attempt's error, or, for a response
// the policy would have retried, a [*StatusError] made from that response
// (its status, header and first 4 KiB of body); the response itself is
// closed.
//
// Which requests are retried is a choice: by default every request whose
// body can be replayed (it has GetBody, or no body at all), whatever its
// method, as Vespa's document/v1 POSTs and PUTs must be.
// [WithIdempotentOnly] restricts retries to the idempotent methods GET,
// HEAD, OPTIONS, TRACE, PUT and DELETE, and to requests with an
// Idempotency-Key or X-Idempotency-Key header (the rule net/http applies
// to its own retries); other requests are then sent once, as if the policy
// allowed one attempt.
//
// # Responses
//
// A response that the policy retries is drained (up to 4 KiB) and closed
// before the next attempt by the policy's discard step (see [WithDiscard]),
// so its connection goes back to the pool. The response RoundTrip returns is
// untouched: its body is unread and open (with [WithAttemptTimeout], wrapped
// so that closing it releases the attempt's context). When the policy gives
// up:
//   - with the last response and a nil error ([DocV1], [SyncRequest], whose
//     exhaustion rule is [ReturnLastOutcome]), RoundTrip returns that
//     response, readable, with a nil error;
//   - with an error that holds the last response (the Value of a
//     [*RetryError]: a policy that retries statuses and gives up with the
//     default rule, or any policy whose context ends during a wait),
//     RoundTrip closes that response and returns the error, since a
//     RoundTripper returns a response or an error, never both. The response
//     in RetryError.Value keeps its status and header, but its body is
//     closed.
//
// The Transport does not read Retry-After on its own, and none of the
// seven policies does: give the policy a [WaitRetryAfter] wait to honour
// it.
//
// # Errors
//
// Every error RoundTrip returns for a request (that is, for all but a nil
// Request or URL) is a [*TransportError] that names the method
// and the URL with its password removed ([url.URL.Redacted]), and never
// request headers or bodies. The error of each attempt reaches the policy's
// predicate as a *TransportError too, which also matches [*url.Error] with
// [errors.As], so [IsConnectionError] and other predicates classify it as
// they classify the errors of [http.Client.Do]. A connection the server
// closes before or while sending the response header is thus a connection
// error, which [SyncRequest] retries.
//
// A Transport is safe for concurrent use by multiple goroutines.
type Transport struct {
	base           http.RoundTripper
	policy         Policy
	idempotentOnly bool
	attemptTimeout time.Duration
}

// TransportOption configures a [Transport] in [NewTransport].
type TransportOption func(*Transport)

// NewTransport returns a Transport that sends requests through base under
// p. A nil base means [http.DefaultTransport].
func NewTransport(base http.RoundTripper, p Policy, opts ...TransportOption) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, policy: p}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	return t
}

// WithIdempotentOnly makes a [Transport] retry only requests with an
// idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or an
// Idempotency-Key or X-Idempotency-Key header. Other requests, such as a
// POST, are sent once, and their outcome comes back as the policy gives it
// when it stops after one attempt.
func WithIdempotentOnly() TransportOption {
	return func(t *Transport) { t.idempotentOnly = true }
}

// WithAttemptTimeout gives each attempt of a [Transport] its own time limit
// d, counted from the start of the attempt until the response header has
// arrived. An attempt that runs out of time fails with an error that matches
// [ErrAttemptTimeout], which policies that retry any error ([Query],
// [DocV1], [ControlPlane], [URLValidation]) retry; [IsConnectionError] does
// not count it, so add it to a policy that retries only connection errors:
//
//	p := retries.SyncRequest.Copy(retries.WithRetry(retries.RetryAny(
//		retries.SyncRequest.Retry(), retries.RetryIfErrorIs(retries.ErrAttemptTimeout))))
//
// The limit stops once the header has arrived: reading the body of the
// response RoundTrip returns is bounded only by the caller's context, since a
// response already handed to the caller can no longer be retried. The
// attempt's context lives until that body is closed or read to the end. The
// caller's own deadline ending is never retried. A d of 0 means no limit.
//
// WithAttemptTimeout panics if d is negative.
func WithAttemptTimeout(d time.Duration) TransportOption {
	checkNonNegative("WithAttemptTimeout", "d", d)
	return func(t *Transport) { t.attemptTimeout = d }
}

// ErrBodyNotReplayable is matched (with [errors.Is]) by the error of a
// [Transport] that did not retry a request because its body has no
// [http.Request.GetBody] to replay it with.
var ErrBodyNotReplayable = errors.New("retries: request body cannot be replayed (Request.GetBody is nil)")

// ErrAttemptTimeout is matched (with [errors.Is]) by the error of an attempt
// that ran out of the time [WithAttemptTimeout] gives it.
var ErrAttemptTimeout = errors.New("retries: attempt timed out")

// TransportError is the error of a [Transport]: the error of one attempt, or
// what the policy made of the last one. Its message names the method and
// the redacted URL, as in
// "retries: POST http://user:xxxxx@host/doc: giving up after 3 attempts: EOF",
// and never request headers or bodies.
//
// With [errors.As], a *TransportError also matches a [*url.Error] with the
// Op and URL that [http.Client] would set and the same Err, so that code
// written for the errors of http.Client.Do, such as [IsConnectionError],
// handles it unchanged.
type TransportError struct {
	// Method is the request's method, such as "POST".
	Method string
	// URL is the request's URL with any password replaced by "xxxxx".
	URL string
	// Err is the underlying error.
	Err error
}

// Error returns "retries: METHOD URL: " followed by Err's message, without
// Err's own "retries: " prefix.
func (e *TransportError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = strings.TrimPrefix(e.Err.Error(), "retries: ")
	}
	return "retries: " + e.Method + " " + e.URL + ": " + msg
}

// Unwrap returns Err.
func (e *TransportError) Unwrap() error { return e.Err }

// As lets errors.As treat e as a *url.Error, the error of an http.Client.
func (e *TransportError) As(target any) bool {
	if p, ok := target.(**url.Error); ok {
		*p = &url.Error{Op: urlOp(e.Method), URL: e.URL, Err: e.Err}
		return true
	}
	return false
}

// urlOp spells a method as http.Client does in a *url.Error: "Post".
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

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
	return "request body cannot be replayed (Request.GetBody is nil), so it was sent once and not retried: " + msg
}

func (e *notReplayed) Unwrap() []error { return []error{ErrBodyNotReplayable, e.cause} }

// attemptTimeout is the error of an attempt that ran out of time.
type attemptTimeout struct{ d time.Duration }

func (e *attemptTimeout) Error() string        { return "attempt timed out after " + e.d.String() }
func (e *attemptTimeout) Is(target error) bool { return target == ErrAttemptTimeout }

// Timeout reports true, as the timeouts of net and net/http do.
func (e *attemptTimeout) Timeout() bool { return true }

// RoundTrip sends req under the Transport's policy and returns the response
// that ends the call, or a [*TransportError]; see [Transport] for the rules.
// It implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil || req.URL == nil {
		if req != nil && req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("retries: Transport.RoundTrip: nil Request or Request.URL")
	}
	r := &roundTrip{t: t, req: req, method: req.Method, url: req.URL.Redacted()}
	if r.method == "" {
		r.method = http.MethodGet
	}
	defer r.closeBody()
	switch {
	case hasBody(req) && req.GetBody == nil:
		return r.once(true)
	case t.idempotentOnly && !isIdempotent(req):
		return r.once(false)
	}
	resp, err := DoValue(req.Context(), t.policy, r.attempt)
	return r.finish(resp, err)
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, when it has such a method (as [*http.Transport] does).
// [http.Client.CloseIdleConnections] calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
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
	t           *Transport
	req         *http.Request
	method, url string
	ownBody     bool // the caller's Body was handed to the base RoundTripper
}

// closeBody closes the caller's body unless the base RoundTripper took it.
// Attempts send bodies from GetBody, so the caller's own is never read.
func (r *roundTrip) closeBody() {
	if !r.ownBody && r.req.Body != nil {
		_ = r.req.Body.Close()
	}
}

func (r *roundTrip) wrap(err error) *TransportError {
	return &TransportError{Method: r.method, URL: r.url, Err: err}
}

// attempt makes one round trip through the base RoundTripper.
func (r *roundTrip) attempt(ctx context.Context) (*http.Response, error) {
	actx, cancel := ctx, context.CancelCauseFunc(nil)
	if r.t.attemptTimeout > 0 {
		actx, cancel = context.WithCancelCause(ctx)
	}
	req := r.req.Clone(actx)
	switch {
	case !hasBody(r.req):
	case r.req.GetBody != nil:
		body, err := r.req.GetBody()
		if err != nil {
			if cancel != nil {
				cancel(nil)
			}
			return nil, backoff.Permanent(r.wrap(&getBodyError{err}))
		}
		req.Body = body
	default:
		r.ownBody = true // sent once, with the caller's own body
	}
	if cancel == nil {
		return r.outcome(r.t.base.RoundTrip(req))
	}

	timeout := &attemptTimeout{d: r.t.attemptTimeout}
	timer := time.AfterFunc(r.t.attemptTimeout, func() { cancel(timeout) })
	resp, err := r.t.base.RoundTrip(req)
	if fired := !timer.Stop(); fired && ctx.Err() == nil {
		// The attempt ran out of time, even if a response arrived at the
		// same instant: its context is canceled, so its body is unusable.
		cancel(nil)
		if resp != nil {
			discardBody(resp)
		}
		return nil, r.wrap(timeout)
	}
	if err != nil || resp == nil || resp.Body == nil {
		cancel(nil)
		return r.outcome(resp, err)
	}
	// The attempt's context must outlive RoundTrip: the caller reads the
	// body under it. It ends when the body is closed or read to the end.
	resp.Body = newCancelBody(resp.Body, func() { cancel(nil) })
	return resp, nil
}

func hasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// outcome turns the base RoundTripper's result into the attempt's outcome.
func (r *roundTrip) outcome(resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		if resp != nil { // a RoundTripper must not return both; drop the response
			discardBody(resp)
		}
		if te, ok := err.(*TransportError); ok && te.Method == r.method && te.URL == r.url {
			return nil, err // an inner Transport already named this request
		}
		return nil, r.wrap(err)
	}
	if resp == nil {
		return nil, r.wrap(errors.New("base RoundTripper returned neither a response nor an error"))
	}
	return resp, nil
}

// finish turns DoValue's result into RoundTrip's.
func (r *roundTrip) finish(resp *http.Response, err error) (*http.Response, error) {
	if err == nil { // attempt never returns nil, nil
		return resp, nil
	}
	if resp != nil {
		discardBody(resp)
	}
	if _, ok := err.(*TransportError); ok {
		return nil, err // an attempt's own error, named already
	}
	if re, ok := err.(*RetryError); ok {
		// Avoid naming the request twice: keep the attempt's own error.
		if ae, ok := re.Err.(*TransportError); ok && ae.Method == r.method && ae.URL == r.url {
			re.Err = ae.Err
		}
	}
	return nil, r.wrap(err)
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
	resp, err := DoValue(r.req.Context(), p, r.attempt)
	if !notReplayable || !would {
		return r.finish(resp, err)
	}
	cause := err
	if re, ok := err.(*RetryError); ok && re.Err != nil {
		cause = re.Err
	}
	if resp != nil {
		cause = newStatusError(resp)
	}
	if te, ok := cause.(*TransportError); ok {
		if errors.Is(te.Err, ErrBodyNotReplayable) {
			return nil, cause // an inner Transport already said why
		}
		cause = te.Err
	}
	return nil, r.wrap(&notReplayed{cause: cause})
}

// getBodyError is the error of a failed Request.GetBody.
type getBodyError struct{ err error }

func (e *getBodyError) Error() string { return "Request.GetBody: " + e.err.Error() }
func (e *getBodyError) Unwrap() error { return e.err }

// cancelBody releases an attempt's context when the body is closed or read
// to the end.
type cancelBody struct {
	rc   io.ReadCloser
	once sync.Once
	stop func()
}

func newCancelBody(rc io.ReadCloser, stop func()) io.ReadCloser {
	b := &cancelBody{rc: rc, stop: stop}
	if w, ok := rc.(io.ReadWriteCloser); ok { // a 101 Switching Protocols body
		return &cancelBodyRW{cancelBody: b, w: w}
	}
	return b
}

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

type cancelBodyRW struct {
	*cancelBody
	w io.Writer
}

func (b *cancelBodyRW) Write(p []byte) (int, error) { return b.w.Write(p) }
