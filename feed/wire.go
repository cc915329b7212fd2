package feed

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"sync"
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

	mu                 sync.Mutex
	codes              map[int]int64
	latencyMin, latMax time.Duration
	latencySum         time.Duration
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
	s.mu.Lock()
	if s.codes == nil {
		s.codes = map[int]int64{}
	}
	s.codes[code]++
	if s.latencyMin == 0 || latency < s.latencyMin {
		s.latencyMin = latency
	}
	s.latMax = max(s.latMax, latency)
	s.latencySum += latency
	s.mu.Unlock()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.responses.Load(); n > 0 {
		avg = s.latencySum / time.Duration(n)
	}
	return s.latencyMin, avg, s.latMax, maps.Clone(s.codes)
}

// opKey is the context key of an operation's *opState.
type opKey struct{}

// opState is what the wire knows of one operation, carried by its
// context: the requests sent for it, and whether one is on the wire, so
// that neither an interrupt nor a move to another endpoint abandons a
// request written while it may still be applied (see halt and move).
type opState struct {
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
	redials  int     // rounds of attempts begun again after a refused connection or an outage (see redial, outlast)
	afterAck bool    // it went round again once its endpoint acknowledged another after its failure (see outlast)
	timer    opTimer // its place in the queue of Config.Timeout (see pause.track)

	mu      sync.Mutex
	onWire  int                     // requests on the wire now
	stopOp  context.CancelCauseFunc // ends the operation's context
	stopped error                   // a halt asked for while a request was on the wire
	pending bool                    // a move asked for while a request was on the wire
	stay    int                     // the current stay's number
	moveOut context.CancelCauseFunc // ends the current stay on an endpoint with errMoved; nil between stays
}

// unknown reports whether op, whose state is st, is not safe to repeat and
// a request of it may have been applied: then it is never sent again (not
// on another endpoint, not on another round), and if it fails its outcome
// is unknown.
func (st *opState) unknown(op *operation) bool { return !op.safe && st.maybeApplied.Load() }

// withOpState returns a context for one operation, carrying a new
// *opState whose halt ends it, and the function that ends it.
func withOpState(ctx context.Context) (context.Context, *opState, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &opState{stopOp: cancel}
	return context.WithValue(ctx, opKey{}, s), s, cancel
}

// liveOps are the operations being sent, so that a stop halts each.
type liveOps struct {
	mu      sync.Mutex
	ops     map[*opState]struct{}
	stopped error // the cause of the stop; operations added after it halt at once
}

func (l *liveOps) add(s *opState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped != nil {
		s.halt(l.stopped)
		return
	}
	if l.ops == nil {
		l.ops = map[*opState]struct{}{}
	}
	l.ops[s] = struct{}{}
}

// haltEach halts every operation being sent with cause, and none added
// later.
func (l *liveOps) haltEach(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.haltLocked(cause)
}

// haltLocked halts every operation being sent. l.mu is held.
func (l *liveOps) haltLocked(cause error) {
	for s := range l.ops {
		s.halt(cause)
	}
}

func (l *liveOps) remove(s *opState) {
	l.mu.Lock()
	delete(l.ops, s)
	l.mu.Unlock()
}

// halt halts every operation being sent, and those added later, with
// cause.
func (l *liveOps) halt(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = cause
	l.haltLocked(cause)
}

// halt ends the operation with cause, at once if none of its requests is
// on the wire, or else as the last one leaves it: no new request goes out,
// and none on the wire is abandoned.
func (s *opState) halt(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onWire > 0 {
		s.stopped = cause
		return
	}
	s.stopOp(cause)
}

// move ends the operation's stay number stay on its endpoint with
// errMoved, at once if none of its requests is on the wire, or else as the
// last one leaves it: a request written is never abandoned to be sent
// elsewhere while it may still be applied. A stay already over is left
// alone.
func (s *opState) move(stay int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stay != s.stay {
		return
	}
	if s.onWire > 0 {
		s.pending = true
		return
	}
	if s.moveOut != nil {
		s.moveOut(errMoved)
	}
}

// setStay starts a stay that cancel ends, or ends the stay with nil, and
// returns its number.
func (s *opState) setStay(cancel context.CancelCauseFunc) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stay++
	s.moveOut, s.pending = cancel, false
	return s.stay
}

// enter marks a request of the operation as going on the wire under ctx,
// and reports false, sending nothing, if ctx has ended (by a move).
func (s *opState) enter(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s.onWire++
	return true
}

// leave marks a request as off the wire: it failed, or its response was
// read or closed. A move asked for meanwhile happens now.
func (s *opState) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onWire--
	if s.onWire == 0 && s.stopped != nil {
		s.stopOp(s.stopped)
		s.stopped = nil
	}
	if s.onWire == 0 && s.pending {
		s.pending = false
		if s.moveOut != nil {
			s.moveOut(errMoved)
		}
	}
}

// wireCounter counts the requests that go on the wire and what comes back.
// It is the base RoundTripper of the retrying Transports.
type wireCounter struct {
	base http.RoundTripper
	s    *wireStats
}

func (t wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(opKey{}).(*opState)
	if st != nil && st.fence != nil {
		if err := st.fence.Admit(req.Context(), st.op.public()); err != nil {
			return nil, &fenceError{err}
		}
	}
	if st != nil && !st.enter(req.Context()) {
		return nil, context.Cause(req.Context())
	}
	t.s.requests.Add(1)
	if st != nil && st.run != nil {
		st.run.requestOut()
	}
	if st != nil && st.attempts.Add(1) > 1 {
		t.s.retries.Add(1)
	}
	if req.ContentLength > 0 {
		t.s.requestBytes.Add(req.ContentLength)
	}
	t.s.inFlight.Add(1)
	defer t.s.inFlight.Add(-1)
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.s.exceptions.Add(1)
		d := err.Error()
		t.s.lastFailure.Store(&d)
		if st != nil && !isDialError(err) {
			st.maybeApplied.Store(true)
		}
		if st != nil {
			st.leave()
		}
		return nil, err
	}
	t.s.response(resp.StatusCode, time.Since(start))
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		if st != nil {
			st.maybeApplied.Store(true)
		}
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.s.responseBytes, op: st}
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

// countingBody adds the bytes read from a response body to n, and tells
// op (if not nil) that the request has left the wire once the body is read
// to its end or closed.
type countingBody struct {
	io.ReadCloser
	n    *atomic.Int64
	op   *opState
	left atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil {
		b.leave()
	}
	return n, err
}

func (b *countingBody) Close() error {
	err := b.ReadCloser.Close()
	b.leave()
	return err
}

// leave tells op, once, that the request is off the wire.
func (b *countingBody) leave() {
	if b.op != nil && b.left.CompareAndSwap(false, true) {
		b.op.leave()
	}
}

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
