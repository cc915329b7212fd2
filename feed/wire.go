package feed

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/internal/redact"
)

// wireStats are the counts of what went on the wire, kept by a
// wireCounter below the retrying Transports, so that every attempt counts.
type wireStats struct {
	requests, requestBytes   atomic.Int64
	exceptions               atomic.Int64 // requests that got no response
	responses, responseBytes atomic.Int64
	responseErrors           atomic.Int64 // responses with a status other than 2xx
	inFlight                 atomic.Int64
	retries                  atomic.Int64 // requests beyond the first of each operation
	throttled                atomic.Int64 // 429 responses
	unavailable              atomic.Int64 // 503 responses

	lastFailure atomic.Pointer[string] // the last 5xx or error, described
	secrets     *redact.Redactor       // redacts the header values sent, in a quoted body

	codes                          [1000]atomic.Int64 // responses by status (net/http takes three digits only)
	latencyMin, latMax, latencySum atomic.Int64       // to the response header, in nanoseconds
}

func (s *wireStats) response(code int, latency time.Duration) {
	s.responses.Add(1)
	if code/100 != 2 {
		s.responseErrors.Add(1)
	}
	switch code {
	case http.StatusTooManyRequests:
		s.throttled.Add(1)
	case http.StatusServiceUnavailable:
		s.unavailable.Add(1)
	}
	if code >= 0 && code < len(s.codes) {
		s.codes[code].Add(1)
	}
	d := int64(latency)
	for lo := s.latencyMin.Load(); lo == 0 || d < lo; lo = s.latencyMin.Load() {
		if s.latencyMin.CompareAndSwap(lo, d) {
			break
		}
	}
	for hi := s.latMax.Load(); d > hi; hi = s.latMax.Load() {
		if s.latMax.CompareAndSwap(hi, d) {
			break
		}
	}
	s.latencySum.Add(d)
}

// failure describes the last 5xx response or error on the wire.
func (s *wireStats) failure() string {
	if d := s.lastFailure.Load(); d != nil {
		return *d
	}
	return "no failure seen"
}

// latency returns the minimum, average and maximum time to a response
// header, and the counts by status code.
func (s *wireStats) latency() (lo, avg, hi time.Duration, codes map[int]int64) {
	if n := s.responses.Load(); n > 0 {
		avg = time.Duration(s.latencySum.Load() / n)
	}
	codes = map[int]int64{}
	for c := range s.codes {
		if n := s.codes[c].Load(); n > 0 {
			codes[c] = n
		}
	}
	return time.Duration(s.latencyMin.Load()), avg, time.Duration(s.latMax.Load()), codes
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
	deadline      deadline      // its place in the wireCounter's attempts
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

// wireCounter counts the requests that go on the wire and what comes back.
// It is the base RoundTripper of the retrying Transports, and sends each
// request of an operation under a context of its own (see opState), within
// Config.AttemptTimeout.
type wireCounter struct {
	base     http.RoundTripper
	s        *wireStats
	attempts *timeouts // Config.AttemptTimeout's; nil without one
}

func (t wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(opKey{}).(*opState)
	if st == nil {
		return nil, errors.New("feed: a request without an operation")
	}
	if st.fence != nil {
		if err := st.fence.Admit(req.Context(), st.op.pub); err != nil {
			return nil, &fenceError{err}
		}
	}
	rq := &request{op: st, n: &t.s.responseBytes}
	rq.ctx, rq.cancel = context.WithCancelCause(st.wire)
	// Stored before the look at the operation's context, which its
	// timeout ends before it looks here: one of the two sees the other.
	st.onWire.Store(rq)
	if req.Context().Err() != nil { // halted, or moved: nothing goes out
		rq.leave()
		return nil, context.Cause(req.Context())
	}
	t.s.requests.Add(1)
	if st.run != nil {
		st.run.requestOut()
	}
	if st.attempts.Add(1) > 1 {
		t.s.retries.Add(1)
	}
	if req.ContentLength > 0 {
		t.s.requestBytes.Add(req.ContentLength)
	}
	t.s.inFlight.Add(1)
	defer t.s.inFlight.Add(-1)
	if t.attempts != nil {
		t.attempts.track(&rq.deadline, rq)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(req.WithContext(rq.ctx))
	if t.attempts != nil {
		t.attempts.untrack(&rq.deadline)
	}
	if err != nil {
		timedOut := context.Cause(rq.ctx) == errAttemptTimeout
		rq.leave()
		t.s.exceptions.Add(1)
		d := err.Error()
		t.s.lastFailure.Store(&d)
		if !isDialError(err) {
			st.maybeApplied.Store(true)
		}
		if timedOut {
			return nil, &attemptTimeout{d: t.attempts.timeout}
		}
		return nil, err
	}
	t.s.response(resp.StatusCode, time.Since(start))
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		st.maybeApplied.Store(true)
	}
	rq.ReadCloser = resp.Body
	resp.Body = rq
	if resp.StatusCode/100 == 5 {
		t.s.noteFailure(resp)
	}
	return resp, nil
}

// noteFailure keeps a description of a 5xx response, its status and
// message, and leaves its body whole for the layers above.
func (s *wireStats) noteFailure(resp *http.Response) {
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxFailureBody))
	d := resp.Status
	if len(head) > 0 {
		d += ": " + message(head, s.secrets)
	}
	s.lastFailure.Store(&d)
	rest := io.Reader(resp.Body)
	if err != nil {
		rest = errReader{err}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), resp.Body}
}

// maxFailureBody bounds the part of a 5xx body read for its message.
const maxFailureBody = 4 << 10

// errReader returns err from every Read.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Which outcomes the outer (DocV1) layer retries, by operation. The inner
// (Throttle) layer retries a 429 for every operation: the server refused
// it without applying it.
var (
	// retrySafe is for an operation that may be applied twice (a put, a
	// remove, an update without a condition or arithmetic): DocV1's own
	// rule, any error (a reset connection, a timed-out attempt) or a 503,
	// and also a 502 or 504, which a proxy answers when it lost the
	// connection to Vespa or gave up waiting, whether or not Vespa applied
	// the operation. pyvespa's DocV1 alone returns such a 502 as the outcome,
	// so the document is lost.
	// A TLS error (a certificate refused either way, a server that does
	// not speak TLS) is never retried: it would fail the same way, and the
	// feed stops at the first one instead (see isTLSError).
	// A request that Config.Fence stopped is not retried either.
	retrySafe = retries.RetryAll(
		retries.RetryAny(retries.DocV1.Retry(), retries.RetryIfStatus(http.StatusBadGateway, http.StatusGatewayTimeout)),
		retries.RetryNot(retries.RetryIfError(isTLSError)), retries.RetryNot(retries.RetryIfErrorAs[*fenceError]()))

	// retryUnsafe is for a conditional or arithmetic update, which must
	// not be applied twice: only outcomes that say the operation was not
	// applied, a 503 (Vespa refused it) or a connection that could not be
	// made. A reset, a timeout or a proxy's 502 or 504 leaves the outcome
	// unknown, so the operation fails and is reported instead.
	retryUnsafe = retries.RetryAny(retries.RetryIfStatus(http.StatusServiceUnavailable), retries.RetryIfError(isDialError))
)

// retriedAgain reports whether op's retry rule (retrySafe or retryUnsafe)
// would send it again after the outcome v (its last response, or nil) and
// err, and err is not a stop of the whole feed (see isFeedStop): then it
// may go round again (see detour and outlast).
func retriedAgain(op *operation, v any, err error) bool {
	rule := retryUnsafe
	if op.safe {
		rule = retrySafe
	}
	return rule.Match(v, err) && !isFeedStop(err)
}

// isFeedStop reports whether err stops the whole feed: an outage that
// outlasted MaxOutage, or a TLS error.
func isFeedStop(err error) bool {
	return errors.As(err, new(*outageError)) || errors.As(err, new(*tlsStop))
}

// fenceError is Config.Fence's refusal of a request (Fence.Admit).
type fenceError struct{ err error }

func (e *fenceError) Error() string { return e.err.Error() }

func (e *fenceError) Unwrap() error { return e.err }

// isTLSError reports whether err is a TLS failure that every attempt would
// meet again: a certificate the client does not trust, an alert from the
// server (such as a client certificate missing or refused), or a server
// that does not speak TLS.
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		op       *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) ||
		errors.As(err, &op) && op.Op == "remote error"
}

// isDialError reports whether err is a failure to connect, before anything
// was sent: a dial that failed, or a new connection's first write refused
// by Config.Fence (Fence.Until).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || isFreshLeaseError(err)
}
