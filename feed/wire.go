package feed

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/internal/redact"
)

// wireStats are the counts of what went on the wire, kept by the
// connection pool at the bottom of the retrying Transports, so that every
// attempt counts.
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

// DefaultConnections is the number of connection pools when
// Config.Connections is 0, as many as `vespa feed` opens connections: over
// HTTP/2, 8 connections per endpoint.
const DefaultConnections = 8

// connPool spreads requests over transports that each keep connections
// of their own. HTTP/2 multiplexes a transport's requests to one host on
// one connection, so n transports give n connections per endpoint, which
// an L4 load balancer in front of several containers spreads; over
// HTTP/1.1 each transport opens what its requests need, up to its cap.
type connPool struct {
	ts   []http.RoundTripper // *http.Transport, but in tests
	load []atomic.Int64      // each transport's requests, from roundTrip until their body is done with
	next atomic.Uint32
	s    *wireStats
}

// newConnPool returns the feed's transports for cfg, with idle
// connections kept for slots requests: cfg.Connections transports of one
// connection per host each, or DefaultConnections without a cap when it is
// 0.
func newConnPool(cfg Config, slots int, s *wireStats) *connPool {
	n, perHost := cfg.Connections, 1
	if n == 0 {
		n, perHost = DefaultConnections, 0
	}
	p := &connPool{ts: make([]http.RoundTripper, n), load: make([]atomic.Int64, n), s: s}
	for i := range p.ts {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxConnsPerHost = perHost
		tr.MaxIdleConnsPerHost = max(perHost, slots/n+1)
		tr.MaxIdleConns = tr.MaxIdleConnsPerHost
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		if cfg.Fence != nil {
			tr.DialContext = leaseDial(tr.DialContext, cfg.Fence.Until)
		}
		if cfg.HTTP2 {
			// Prior knowledge on http URLs, as Vespa's feed client
			// does; ALPN on https.
			var pr http.Protocols
			pr.SetHTTP2(true)
			pr.SetUnencryptedHTTP2(true)
			tr.Protocols = &pr
		}
		p.ts[i] = tr
	}
	return p
}

// pickFrom bounds the transports looked at for each request.
const pickFrom = 8

// pick returns the least loaded of up to pickFrom transports, taken in
// turn: with one connection per transport over HTTP/1.1, a request goes
// to an idle connection when there is one.
func (p *connPool) pick() int {
	n := len(p.ts)
	start := int(p.next.Add(1) % uint32(n))
	best := start
	for k := 1; k < min(n, pickFrom); k++ {
		i := (start + k) % n
		if p.load[i].Load() < p.load[best].Load() {
			best = i
		}
	}
	return best
}

// roundTrip sends req on the least loaded transport and counts it on the
// wire: the request, and its response or error. With a response, it
// returns the transport's load, for the caller to take the request off
// once it is done with the response's body.
func (p *connPool) roundTrip(req *http.Request) (*http.Response, *atomic.Int64, error) {
	s := p.s
	s.requests.Add(1)
	if req.ContentLength > 0 {
		s.requestBytes.Add(req.ContentLength)
	}
	i := p.pick()
	load := &p.load[i]
	load.Add(1)
	s.inFlight.Add(1)
	start := time.Now()
	resp, err := p.ts[i].RoundTrip(req)
	s.inFlight.Add(-1)
	if err != nil {
		load.Add(-1)
		s.exceptions.Add(1)
		d := err.Error()
		s.lastFailure.Store(&d)
		return nil, nil, err
	}
	s.response(resp.StatusCode, time.Since(start))
	if resp.StatusCode/100 == 5 {
		s.noteFailure(resp)
	}
	return resp, load, nil
}

// CloseIdleConnections closes every transport's idle connections.
func (p *connPool) CloseIdleConnections() {
	for _, t := range p.ts {
		if t, ok := t.(interface{ CloseIdleConnections() }); ok {
			t.CloseIdleConnections()
		}
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
// may go round again (see again).
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

// isDialError reports whether err is a failure to connect, before anything
// was sent: a dial that failed, or a new connection's first write refused
// by Config.Fence (Fence.Until).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || isFreshLeaseError(err)
}
