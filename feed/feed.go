// Package feed is a Vespa feed client: it sends puts, updates and removes
// to a document/v1 endpoint through the retry layers of package retries,
// and says what became of each. It is the engine of the retries feed
// command.
//
// A Client has, per endpoint, an adaptive limiter, a circuit breaker that
// waits out an outage with probes, and a retry budget shared by all its
// operations. Send (and Put, Update and Remove) sends one operation and
// waits for its answer, from any number of goroutines; Feed sends a
// stream of them, such as Read's from a file in Vespa's feed format, with
// a callback per operation. Operations on one document go out one at a
// time, in order. An operation that is not safe to repeat (a conditional
// or arithmetic update) is sent again only after an answer that says it
// was not applied.
package feed

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

const (
	// DefaultMaxInFlight is the adaptive limiter's cap when
	// Config.MaxInFlight is 0: at most this many requests in flight, and
	// this many operations dispatched at once. A Feed dispatches fewer:
	// at most 64 beyond the limiters' current limits.
	DefaultMaxInFlight = 1024
	// maxMessage bounds the part of a response body quoted in a report.
	maxMessage = 200
)

// Config says how a Client feeds. A Config with only URL set feeds as
// "retries feed -url URL" does: a zero field means the command's default,
// which its comment gives, and a negative duration turns its limit off.
type Config struct {
	URL string // the endpoint, such as http://localhost:8080
	// URLs, if not empty, are several endpoints in place of URL (container
	// nodes without a load balancer): each operation goes to the least
	// loaded whose breaker is closed, and each has its own limiter and
	// breaker.
	URLs        []string
	Header      http.Header // sent with every request; never printed
	Concurrency int         // > 0: fixed, without a limiter; 0: the adaptive limiter
	MaxInFlight int         // the limiter's cap; 0: DefaultMaxInFlight
	// MaxDispatchBytes bounds the size of the operations dispatched at
	// once, their text and body (one larger operation goes alone); 0:
	// DefaultMaxDispatchBytes.
	MaxDispatchBytes int
	// Connections is the number of connections per endpoint: exactly
	// that many over HTTP/2, at most that many over HTTP/1.1; 0:
	// DefaultConnections over HTTP/2, as many as needed over HTTP/1.1.
	Connections int
	HTTP2       bool // HTTP/2 without TLS on http URLs (prior knowledge)
	// TLS configures https connections (a client certificate, the CAs to
	// trust); nil: Go's defaults. HTTP/2 is offered by ALPN either way.
	TLS *tls.Config

	// Timeout bounds each operation, its retries included, not counting
	// the time the feed is paused by an outage; 0: 2 minutes.
	Timeout time.Duration
	// AttemptTimeout bounds each request until its response header; 0:
	// 30 s, or ServerTimeout and a tenth more and a second if that is
	// longer, so that the server's own timeout answers first.
	AttemptTimeout time.Duration
	// Grace is how long a Feed whose context ended waits for the requests
	// on the wire; 0: 5 s.
	Grace time.Duration

	// Route, TraceLevel, ServerTimeout and DryRun are document/v1's
	// request parameters route, tracelevel, timeout and dryRun, sent with
	// every operation when set; a failed operation's report quotes the
	// trace the server returned.
	Route         string
	TraceLevel    int
	ServerTimeout time.Duration
	DryRun        bool
	// Compression says which bodies go out gzipped: CompressAuto (the
	// zero value) those over 512 bytes. A retry sends the same bytes.
	Compression Compression

	// MaxOutage ends the feed when it has been paused by an outage for
	// this long; 0: 5 minutes. The feed pauses while its breaker is open.
	MaxOutage time.Duration
	// FirstResponse ends a Feed, as a setup error, when no request has had
	// a response this long after the first went out (a wrong host or
	// port); 0: 30 s.
	FirstResponse time.Duration
	// MaxProbeInterval is the breaker's (see retries.BreakerConfig).
	MaxProbeInterval time.Duration
	// Failed, if not nil, receives every operation of the input that was
	// not acknowledged, in feed format, one a line: those that failed,
	// those not sent, and the input not read when the feed stopped early.
	Failed io.Writer
	// Unknown, if not nil, receives in place of Failed each operation not
	// safe to repeat (see retryUnsafe) that failed after a request that
	// may have been applied: no response (a reset, a timeout, an
	// interrupt), or a 500, 502 or 504. Feeding it again may apply it
	// twice, so that is the user's decision. nil: Failed.
	Unknown io.Writer
	// Unread, if not nil, receives the input from where broken JSON
	// stopped the reading on, byte for byte, to be fixed and fed.
	Unread io.Writer

	// BeforeUnsafe, if not nil, is called with each operation not safe to
	// repeat (see retryUnsafe) before its first request goes out, from the
	// goroutine that sends it, and the operation waits until it returns:
	// a feed that must resume after a crash records there, durably, that
	// the operation may be applied. When it returns an error, the
	// operation is not sent: if its context had ended, it ends with
	// ErrNotSent; when the error matches ErrNotSent, it ends with that
	// error, neither written nor counted, and later operations on its
	// document are not held back (a Kafka member whose partition was
	// revoked leaves it to the next); otherwise it fails with the error, as
	// an operation whose outcome is unknown (written to Unknown), since an
	// earlier feed may have applied it.
	BeforeUnsafe func(context.Context, Operation) error
	// HoldBack are document ids whose operations are held back from the
	// start of each Feed, as after a failure (ErrHeldBack): a feed resumed
	// after a crash names those of its earlier Failed and Unknown files,
	// so that no later operation overtakes them.
	HoldBack []string
	// Resumable leaves out of Failed what a Feed that stops early has not
	// sent: the operations dispatched but not sent (done still hears of
	// them, with ErrNotSent) and the input not read (which is not read).
	// A feed resumed from a checkpoint sends them.
	Resumable bool

	// Outer and Inner are the policies around each request, outside in.
	// The zero Policy means the command's: DocV1 waiting U(0, 0.2 s) then
	// U(0, 0.4 s), around Throttle waiting what a Retry-After asks for (at
	// most 10 s). The feed sets the outer one's predicate (by operation:
	// retrySafe, retryUnsafe), exhaustion rule and Budget, and gives the
	// inner one the limiter and the breaker, and the outer predicate while
	// the breaker is open (retries.RetryIfOutage).
	Outer, Inner retries.Policy
	// Budget bounds the outer layer's retries; nil:
	// retries.NewBudget(0.1, 5), unless NoBudget is set.
	Budget   *retries.Budget
	NoBudget bool

	Log         io.Writer     // failures, and progress unless ProgressOut is set; nil: none
	ProgressOut io.Writer     // progress reports; nil: Log
	Progress    time.Duration // between progress reports; 0: none
	// Terminal rewrites one progress line in place, and ends it with a
	// final report; otherwise each report is a line of its own.
	Terminal bool
	// ProgressLine formats a report; nil: the feed command's line.
	ProgressLine func(Progress) string
	// ProgressJSON makes each report the summary's keys so far, as one
	// line of JSON, instead of a ProgressLine (and never rewritten in
	// place).
	ProgressJSON bool
	// Calls, if not nil, observes the calls of both retry layers (the
	// inner Inner, named Throttle by default, and the outer Outer): their
	// attempts, waits, refusals, holds during an outage, and ends.
	Calls *retries.Observer
}

// Report is what a Feed did: its counts, what it wrote, why it stopped
// early, and its limiter, budget and breaker; Summary gives it as the
// feed command's JSON.
type Report struct {
	operations    int64 // read from the input, bad ones included
	elements      int64 // what ops yielded, errors included
	ok            int64 // acknowledged
	failed        int64 // operations that failed, bad input included
	badInput      int64
	unsent        []*operation // dispatched but not sent when interrupted
	heldBack      int64        // not sent: an earlier operation on the document failed
	written       int64        // written to Config.Failed
	unknown       int64        // unsafe operations that failed with their outcome unknown
	unknownOut    int64        // of those, written to Config.Unknown
	unreadBytes   int64        // written to Config.Unread
	writeErr      error        // the first error writing to Config.Failed
	hasFailedFile bool         // Config.Failed is set
	outage        error        // the *outageError that ended the feed, or nil
	tlsErr        error        // the TLS error that ended the feed, or nil
	setupErr      error        // the *setupStop that ended the feed, or nil
	endpoints     any          // each endpoint's counts, limiter and breaker, when there are several
	pauses        int64        // the times the feed paused
	paused        time.Duration
	unread        inputPos // line > 0: the input from here on was not read (interrupted, or broken JSON)
	notFound      int64    // removes answered 404
	condFailed    int64    // operations answered 412
	refusals      int64    // retries the budget refused
	inFlight      int64    // requests in flight at the end
	elapsed       time.Duration
	wire          *wireStats
	counts        Progress // the counts at the end
	lastErr       error    // the error of the last failed operation

	Limiter *retries.Limiter // the feed's limiter; nil with a fixed concurrency
	Budget  *retries.Budget  // Config.Budget
	Breaker *retries.Breaker // the feed's breaker
}

// TLSError returns the TLS error that stopped the feed (a certificate
// refused either way, a server that does not speak TLS), or nil.
func (r Report) TLSError() error { return r.tlsErr }

// OutageExceeded reports whether an outage outlasted Config.MaxOutage and
// ended the feed.
func (r Report) OutageExceeded() bool { return r.outage != nil }

// SetupError returns why the feed stopped for a wrong setup, or nil: the
// same refusal of the client (401, 403, a 404 to puts, a TLS layer's
// 400) answered its first operations, or no request had a response within
// Config.FirstResponse.
func (r Report) SetupError() error { return r.setupErr }

// Complete reports whether every operation of the input was read, sent and
// acknowledged.
func (r Report) Complete() bool { return r.failed == 0 && r.unread.line == 0 }

// Client sends operations to the document/v1 endpoints of a Config. Its
// limiters, breakers and budget are shared by all its Sends and its Feed.
// A Client is safe for concurrent use by multiple goroutines.
type Client struct {
	cfg                    Config
	endpoints              []*endpoint
	params                 string // the request parameters of every operation, encoded; "" if none
	transport              *connPool
	openEndpoints          atomic.Int64 // endpoints whose breaker is open or half-open
	pause                  pause
	outage                 atomic.Pointer[outageError] // set when the outage outlasted Config.MaxOutage
	tlsErr                 atomic.Pointer[tlsStop]     // set at the first TLS error
	setupErr               atomic.Pointer[setupStop]   // set when a wrong setup stops the feed
	acked                  atomic.Bool                 // an operation was acknowledged
	live                   liveOps                     // the operations being sent
	running                atomic.Pointer[feedRun]     // the running Feed's, or idle
	failedOut              *failedWriter               // nil without Config.Failed
	unknownOut             *failedWriter               // Config.Unknown, or failedOut
	unknown                atomic.Int64                // unsafe operations failed with their outcome unknown
	wire                   wireStats
	out, progressOut       *lockedWriter
	ok, failed, condFailed atomic.Int64
	notFound, refusals     atomic.Int64
	read, badIn            atomic.Int64 // operations read, bad ones included; bad ones
	broken                 *InputError  // the broken JSON that stopped the reading, or nil; set by the dispatching goroutine

	done      func(Operation, Result, error) // the running Feed's
	feeding   sync.Mutex                     // held by the running Feed
	order     idOrder                        // of the Sends
	sendSlots chan struct{}                  // with a fixed concurrency, bounds the Sends in flight
	closeMu   sync.Mutex
	closed    bool
	sends     sync.WaitGroup // the Sends and Feeds running

	mu        sync.Mutex
	base      tally                   // the counts when the running Feed began
	last      Report                  // of the last Feed
	busy      map[string][]*operation // per document id: the operations waiting behind the one in flight
	failedIDs map[string]bool         // documents with a failed operation: later ones are held back
	unsent    []*operation
	heldBack  int64
	lastErr   error
	refusal   string // the refusal of the client that answered the last operations, from the start; "" for another answer
	refused   int    // how many in a row

	testWindowWait func(ops int) // for tests: see window.onWait
}

// New returns a Client for cfg, or an error if an endpoint is not an http
// or https URL with a host.
func New(cfg Config) (*Client, error) {
	urls := cfg.URLs
	if len(urls) == 0 {
		urls = []string{cfg.URL}
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("URL %q: want http://HOST[:PORT] or https://…", raw)
		}
	}
	cfg = withDefaults(cfg)
	c := &Client{cfg: cfg, out: &lockedWriter{w: cfg.Log},
		busy: map[string][]*operation{}, failedIDs: map[string]bool{}}
	c.running.Store(&idle)
	if cfg.Concurrency > 0 {
		c.sendSlots = make(chan struct{}, cfg.Concurrency)
	}
	if cfg.Failed != nil {
		c.failedOut = &failedWriter{w: cfg.Failed}
	}
	c.unknownOut = c.failedOut
	if cfg.Unknown != nil {
		c.unknownOut = &failedWriter{w: cfg.Unknown}
	}
	c.params = requestParams(cfg)
	c.wire.secrets = redactor(cfg.Header)
	c.progressOut = c.out
	if cfg.ProgressOut != nil {
		c.progressOut = &lockedWriter{w: cfg.ProgressOut}
	}
	c.transport = newConnPool(cfg, c.slots())
	for _, raw := range urls {
		c.endpoints = append(c.endpoints, c.newEndpoint(raw))
	}
	return c, nil
}

// feedRun is what the operations of a running Feed share: ctx ends when
// the Feed is interrupted or stopped (no new request then); halt ends its
// reading and new requests, stop also cancels the requests on the wire.
type feedRun struct {
	ctx        context.Context
	halt, stop func(cause error)
}

// idle is the feedRun of a Client with no Feed running: Sends are not
// stopped by a Feed's stops.
var idle = feedRun{ctx: context.Background(), halt: func(error) {}, stop: func(error) {}}

// refusedAfter is the error of an operation whose retry a shared object
// (the budget) refused, after its last outcome: a response's status, or an
// error.
type refusedAfter struct {
	status        int // the last response's, or 0
	last, refusal error
}

func (e *refusedAfter) Error() string { return e.last.Error() + "; " + e.refusal.Error() }

func (e *refusedAfter) Unwrap() []error { return []error{e.last, e.refusal} }

// withDefaults returns cfg with each zero field set to its default, and
// each negative duration to 0 (none).
func withDefaults(cfg Config) Config {
	def := func(d *time.Duration, v time.Duration) {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			*d = 0
		}
	}
	server := cfg.ServerTimeout
	def(&cfg.Timeout, 2*time.Minute)
	def(&cfg.AttemptTimeout, max(30*time.Second, server+server/10+time.Second))
	def(&cfg.Grace, 5*time.Second)
	def(&cfg.MaxOutage, 5*time.Minute)
	def(&cfg.FirstResponse, 30*time.Second)
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Budget == nil && !cfg.NoBudget {
		cfg.Budget = retries.NewBudget(0.1, 5)
	}
	if cfg.NoBudget {
		cfg.Budget = nil
	}
	if isZero(cfg.Outer) {
		cfg.Outer = DefaultOuter
	}
	if isZero(cfg.Inner) {
		cfg.Inner = DefaultInner
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return cfg
}

// The layers of a feed when Config.Outer and Config.Inner are zero.
var (
	// DefaultOuter is DocV1, but waiting U(0, 0.2 s) then U(0, 0.4 s)
	// instead of 1 s then 2 s: the retry budget bounds what retries cost
	// a struggling server and the limiter paces the load, so a 503 or a
	// reset on one of the last documents need not hold up the end of a
	// feed for seconds.
	DefaultOuter = retries.DocV1.Copy(retries.WithWait(retries.WaitRandomExponential(
		retries.Exponential{Multiplier: 200 * time.Millisecond, Max: 2 * time.Second})))
	// DefaultInner is Throttle, waiting what a Retry-After header asks for
	// (at most 10 s) when there is one. With the limiter, which paces
	// these retries itself, the wait is skipped.
	DefaultInner = retries.Throttle.Copy(retries.WithWait(retries.WaitRetryAfter(retries.Throttle.Wait(), 10*time.Second)))
	zeroPolicy   = retries.Policy{}.String()
)

// isZero reports whether p is the zero Policy.
func isZero(p retries.Policy) bool { return p.String() == zeroPolicy }

// newEndpoint returns the endpoint at raw, with its own limiter and
// breaker and the two retrying clients.
func (c *Client) newEndpoint(raw string) *endpoint {
	cfg := c.cfg
	e := &endpoint{url: raw, base: strings.TrimRight(raw, "/"), multi: len(cfg.URLs) > 1}
	e.move, e.moveNow = context.WithCancelCause(context.Background())
	e.breaker = retries.NewBreaker(retries.BreakerConfig{MaxProbeInterval: cfg.MaxProbeInterval,
		OnStateChange: func(from, to retries.BreakerState) { c.onBreaker(e, from, to) }})
	inner := cfg.Inner.Copy(retries.WithBreaker(e.breaker), retries.WithObserver(cfg.Calls))
	if cfg.Concurrency == 0 {
		e.limiter = retries.NewLimiter(retries.LimiterConfig{MaxInFlight: cfg.MaxInFlight})
		inner = inner.Copy(retries.WithLimiter(e.limiter))
	}
	var topts []retries.TransportOption
	if cfg.AttemptTimeout > 0 {
		topts = append(topts, retries.WithAttemptTimeout(cfg.AttemptTimeout))
	}
	wire := wireCounter{base: c.transport, s: &c.wire}
	client := func(pred retries.Predicate) *http.Client {
		// The inner layer also retries, while the breaker is open, what
		// the outer one would: it waits the outage out, and the outer
		// layer spends no attempt and no budget on it.
		innerT := retries.NewTransport(wire, inner.Copy(retries.WithRetry(
			retries.RetryAny(inner.Retry(), retries.RetryIfOutage(e.breaker, pred)))), topts...)
		p := cfg.Outer.Copy(
			retries.WithObserver(cfg.Calls),
			retries.WithRetry(pred),
			retries.WithBudget(cfg.Budget),
			retries.WithOnExhausted(func(s retries.State) error {
				if !errors.Is(s.Refusal, retries.ErrBudgetExhausted) {
					return retries.ReturnLastOutcome(s)
				}
				// Say why the operation failed: the budget, after this
				// outcome.
				c.refusals.Add(1)
				e := &refusedAfter{last: s.Err, refusal: s.Refusal}
				if resp, ok := s.Value.(*http.Response); ok {
					e.last, e.status = errors.New(resp.Status), resp.StatusCode
				}
				return e
			}),
		)
		return &http.Client{
			Transport: retries.NewTransport(innerT, p),
			// A redirect is reported, not followed: a POST must not turn
			// into a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	e.safeOps, e.unsafeOps = client(retrySafe), client(retryUnsafe)
	return e
}

// slots is the number of operations dispatched at once, in flight or
// waiting behind another operation on the same document.
func (c *Client) slots() int {
	if c.cfg.Concurrency > 0 {
		return c.cfg.Concurrency
	}
	return c.cfg.MaxInFlight
}

// queuedPerLimiter is how many operations a feed dispatches beyond its
// limiters' limits: enough that a permit freed or a limit raised finds
// operations waiting for it until the next one ends, and few enough that
// a feed whose limiter holds 20 in flight does not park a thousand
// goroutines (each costs the collector a stack to scan at every cycle).
const queuedPerLimiter = 64

// dispatchLimit bounds the operations a feed with limiters dispatches at
// once: the sum of the endpoints' in-flight limits, plus queuedPerLimiter
// for each. It is nil with a fixed concurrency.
func (c *Client) dispatchLimit() func() int {
	if c.cfg.Concurrency > 0 {
		return nil
	}
	return func() int {
		n := 0
		for _, e := range c.endpoints {
			n += int(math.Ceil(e.limiter.Stats().Limit)) + queuedPerLimiter
		}
		return n
	}
}

func (c *Client) run(ctx context.Context, ops iter.Seq2[Operation, error]) Report {
	start := time.Now()
	defer c.transport.CloseIdleConnections()
	// Requests run under their own context, canceled Config.Grace after
	// ctx ends, at once when an outage outlasts Config.MaxOutage, or when
	// the feed is over.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	sendCtx, cancelSend := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelSend(nil)
	c.running.Store(&feedRun{ctx: runCtx, halt: stopRun, stop: func(cause error) { stopRun(cause); cancelSend(cause) }})
	defer c.running.Store(&idle)
	defer context.AfterFunc(runCtx, func() { c.live.halt(stopCause(runCtx)) })()
	defer c.watchFirstResponse()()
	finished := make(chan struct{})
	graceDone := make(chan struct{})
	go func() {
		defer close(graceDone)
		c.cancelAfterGrace(ctx, finished, cancelSend)
	}()
	var progressDone chan struct{}
	if c.cfg.Progress > 0 {
		progressDone = make(chan struct{})
		go func() {
			defer close(progressDone)
			c.reportProgress(start, finished)
		}()
	}
	// The input is read on its own goroutine, so that an interrupt ends
	// the feed even while a read blocks (a quiet pipe on stdin); that
	// goroutine then stays blocked until the process exits.
	items := make(chan readItem)
	stopRead := make(chan struct{})
	defer close(stopRead)
	go readOps(ops, items, stopRead)
	var wg sync.WaitGroup
	res, eof := c.dispatchAll(runCtx, sendCtx, items, &wg)
	wg.Wait()
	c.pause.disarm() // a feed that ended paused is not stopped later
	close(finished)
	<-graceDone // so that it says nothing once the feed is over
	if progressDone != nil {
		<-progressDone
	}
	c.settle(&res, time.Since(start))
	if err := c.outage.Load(); err != nil {
		res.outage = err
	}
	if err := c.tlsErr.Load(); err != nil {
		res.tlsErr = err.err
	}
	if err := c.setupErr.Load(); err != nil {
		res.setupErr = err
	}
	if !eof {
		why := "interrupted"
		if res.outage != nil || res.tlsErr != nil || res.setupErr != nil {
			why = "stopped"
		}
		c.out.printf("retries feed: %s: the input from %v on was not read\n", why, res.unread)
		if c.failedOut != nil && !c.cfg.Resumable {
			c.writeRest(&res, items)
		}
	}
	c.writeUnread(&res)
	c.mu.Lock()
	res.unknown = c.unknown.Load() - c.base.unknown
	c.mu.Unlock()
	if c.failedOut != nil {
		res.hasFailedFile = true
		res.written, res.writeErr = c.failedOut.result()
		if c.unknownOut != c.failedOut {
			var err error
			res.unknownOut, err = c.unknownOut.result()
			res.writeErr = cmp.Or(res.writeErr, err)
		}
		if res.writeErr != nil {
			c.out.printf("retries feed: writing the operations not acknowledged: %v; the file is incomplete\n", res.writeErr)
		}
	}
	if line := res.shortfall(); line != "" {
		c.out.printf("retries feed: not fed: %s\n", line)
	}
	return res
}

// writeUnread writes the input from the broken JSON that stopped the
// reading on, if any, to Config.Unread, byte for byte.
func (c *Client) writeUnread(res *Report) {
	var syntax *syntaxError
	if c.cfg.Unread == nil || c.broken == nil || !errors.As(c.broken.Err, &syntax) {
		return
	}
	rest := c.broken.Rest()
	if rest == nil {
		c.out.printf("retries feed: the input from %v on cannot be written: its first bytes are not kept\n", c.broken.from)
		return
	}
	n, err := io.Copy(c.cfg.Unread, rest)
	res.unreadBytes = n
	if err != nil {
		res.writeErr = cmp.Or(res.writeErr, err)
		c.out.printf("retries feed: writing the unread input: %v\n", err)
	}
}

// cancelAfterGrace calls cancelSend Config.Grace after ctx ends, unless
// the feed is finished first.
func (c *Client) cancelAfterGrace(ctx context.Context, finished <-chan struct{}, cancelSend context.CancelCauseFunc) {
	select {
	case <-ctx.Done():
	case <-finished:
		return
	}
	switch n := c.wire.inFlight.Load(); {
	case n == 0:
		c.out.printf("retries feed: interrupted: nothing in flight; stopping\n")
	case c.cfg.Grace > 0:
		c.out.printf("retries feed: interrupted: waiting up to %v for the %d requests in flight; interrupt again to quit at once\n", c.cfg.Grace, n)
	default:
		c.out.printf("retries feed: interrupted: canceling the %d requests in flight\n", n)
	}
	t := time.NewTimer(c.cfg.Grace)
	defer t.Stop()
	select {
	case <-t.C:
		// The interrupt's cause, so that an operation not sent yet ends
		// as not sent, whichever cancellation reaches it first.
		cancelSend(stopCause(ctx))
	case <-finished:
	}
}

// dispatchAll takes the operations read into items and dispatches each,
// until the input ends or ctx is done; wg counts the operations'
// goroutines. While the feed is paused it takes none. It reports whether
// the input was read to its end or to an error that stops it, and, when it
// was not, res.unread says from where.
func (c *Client) dispatchAll(ctx, sendCtx context.Context, items <-chan readItem, wg *sync.WaitGroup) (res Report, eof bool) {
	slots := &window{n: c.slots(), max: cmp.Or(c.cfg.MaxDispatchBytes, DefaultMaxDispatchBytes), limit: c.dispatchLimit(), onWait: c.testWindowWait}
	res.unread = inputPos{line: 1} // where the input not yet taken starts
	for {
		if c.pause.wait(ctx) != nil {
			return res, false
		}
		var it readItem
		select {
		case it = <-items:
		case <-ctx.Done():
			return res, false
		}
		if it.err != io.EOF {
			res.elements++
		}
		if it.after.line > 0 {
			res.unread = it.after
		}
		if it.err != nil {
			if c.badInput(&res, it) {
				continue
			}
			return res, true
		}
		it.op.seq = c.read.Add(1)
		if slots.take(ctx, it.op) != nil {
			c.mu.Lock()
			c.unsent = append(c.unsent, it.op)
			c.mu.Unlock()
			return res, false
		}
		c.dispatch(ctx, sendCtx, it.op, slots, wg)
	}
}

// badInput reports an error of the input and counts it. It reports
// whether the reading goes on: after a *OperationError it does; after the end of
// the input, an *InputError or another error it stops, and res.unread is
// then where the unread input starts, or line 0 if all was read.
func (c *Client) badInput(res *Report, it readItem) (goOn bool) {
	err := it.err
	var bad *OperationError
	var stop *InputError
	if err != io.EOF {
		c.tell(it.pub, Result{}, err)
	}
	switch {
	case err == io.EOF:
		res.unread = inputPos{}
		return false
	case errors.As(err, &bad):
		c.read.Add(1)
		c.badIn.Add(1)
		c.failed.Add(1)
		c.out.printf("retries feed: %v (skipped)\n", err)
		return true
	case errors.As(err, &stop):
		c.badIn.Add(1)
		res.unread = stop.from
		c.broken = stop
	default:
		res.unread = inputPos{}
	}
	c.failed.Add(1)
	c.out.printf("retries feed: %v\n", err)
	return false
}

// settle fills in res at the end of the feed, and reports every operation
// read but not sent.
func (c *Client) settle(res *Report, elapsed time.Duration) {
	c.counters(res, elapsed)
	res.counts = c.snapshot()
	c.mu.Lock()
	res.unsent, res.lastErr = c.unsent, c.lastErr
	c.mu.Unlock()
	// In input order, so that the -failed file keeps each document's
	// order: they were added as their goroutines ended, which a stop
	// ends in any order.
	slices.SortStableFunc(res.unsent, func(a, b *operation) int { return cmp.Compare(a.seq, b.seq) })
	res.failed += int64(len(res.unsent))
	for _, op := range res.unsent {
		if c.cfg.Resumable {
			c.out.printf("retries feed: not sent: %s (left to the resumed feed)\n", op.name())
		} else {
			c.out.printf("retries feed: not sent: %s\n", op.name())
			c.failedOut.write(op)
		}
		c.tell(op.public(), Result{}, &Error{Err: ErrNotSent})
	}
}

// counters fills in res with the feed's counts after elapsed.
func (c *Client) counters(res *Report, elapsed time.Duration) {
	now := c.tally()
	c.mu.Lock()
	b := c.base
	c.mu.Unlock()
	res.elapsed = elapsed
	res.ok, res.failed = now.ok-b.ok, now.failed-b.failed
	res.notFound, res.condFailed, res.refusals = now.notFound-b.notFound, now.condFailed-b.condFailed, now.refusals-b.refusals
	res.operations, res.badInput, res.heldBack = now.read-b.read, now.badIn-b.badIn, now.heldBack-b.heldBack
	res.inFlight = c.wire.inFlight.Load()
	first := c.endpoints[0]
	res.wire, res.Limiter, res.Budget, res.Breaker = &c.wire, first.limiter, c.cfg.Budget, first.breaker
	res.pauses, res.paused, _ = c.pause.stats()
	res.endpoints = c.endpointsJSON()
}

// tally is the client's counts of operations since New, Sends included;
// a Feed's are those since its start (Client.base).
type tally struct {
	ok, failed, notFound, condFailed, refusals, read, badIn, heldBack, unknown int64
}

func (c *Client) tally() tally {
	c.mu.Lock()
	heldBack := c.heldBack
	c.mu.Unlock()
	return tally{ok: c.ok.Load(), failed: c.failed.Load(), notFound: c.notFound.Load(), condFailed: c.condFailed.Load(),
		refusals: c.refusals.Load(), read: c.read.Load(), badIn: c.badIn.Load(), heldBack: heldBack, unknown: c.unknown.Load()}
}

// current returns the feed's counts so far, as a Report for the summary.
func (c *Client) current(start time.Time) Report {
	var res Report
	c.counters(&res, time.Since(start))
	res.hasFailedFile = c.failedOut != nil
	if res.hasFailedFile {
		res.written, _ = c.failedOut.result()
	}
	return res
}

// readItem is what readOps read: an operation, or an error with the
// Operation it came with.
type readItem struct {
	op    *operation
	err   error
	pub   Operation // with err: what ops yielded with it
	after inputPos  // where the input after op or an *OperationError starts; line 0 if unknown
}

// readOps sends what ops yields to items, each Operation prepared, until
// ops ends (then io.EOF) or stop is closed.
func readOps(ops iter.Seq2[Operation, error], items chan<- readItem, stop <-chan struct{}) {
	send := func(it readItem) bool {
		select {
		case items <- it:
			return true
		case <-stop:
			return false
		}
	}
	for o, err := range ops {
		it := readItem{err: err, pub: o}
		var bad *OperationError
		switch {
		case err == nil:
			if it.op, err = prepare(o); err != nil {
				it.err = &OperationError{Line: o.Line, Err: err}
			} else {
				it.after = it.op.after
			}
		case errors.As(err, &bad):
			it.after = bad.after
		}
		if !send(it) {
			return
		}
	}
	send(readItem{err: io.EOF})
}

// dispatch starts op, or queues it behind the operation in flight for the
// same document, so that operations on one document are applied in input
// order and a retry never overtakes a later operation.
func (c *Client) dispatch(ctx, sendCtx context.Context, op *operation, slots *window, wg *sync.WaitGroup) {
	c.mu.Lock()
	if ctx.Err() != nil {
		// Stopping: not sent, as the operations before it on its
		// document may not have been; held back, it would be written
		// now, before them.
		c.unsent = append(c.unsent, op)
		c.mu.Unlock()
		slots.give(op)
		return
	}
	if c.failedIDs[op.id] {
		c.holdBack(op)
		c.mu.Unlock()
		slots.give(op)
		return
	}
	if q, ok := c.busy[op.id]; ok {
		c.busy[op.id] = append(q, op)
		c.mu.Unlock()
		return
	}
	c.busy[op.id] = nil
	c.mu.Unlock()
	wg.Go(func() {
		for op != nil {
			ok := c.send(sendCtx, op)
			slots.give(op)
			c.mu.Lock()
			q := c.busy[op.id]
			if !ok { // the later operations must not overtake it
				c.failedIDs[op.id] = true
			}
			switch {
			case len(q) == 0:
				delete(c.busy, op.id)
				op = nil
			case ctx.Err() != nil: // interrupted: send nothing more
				c.unsent = append(c.unsent, q...)
				for _, later := range q {
					slots.give(later)
				}
				delete(c.busy, op.id)
				op = nil
			case !ok:
				for _, later := range q {
					c.holdBack(later)
					slots.give(later)
				}
				delete(c.busy, op.id)
				op = nil
			default:
				op, c.busy[op.id] = q[0], q[1:]
			}
			c.mu.Unlock()
		}
	})
}

// tlsStop is the cause of every operation's end after a TLS error.
type tlsStop struct{ err error }

func (e *tlsStop) Error() string { return "stopped by a TLS error: " + e.err.Error() }

// stopOnTLS ends the feed at the first TLS error: every later attempt
// would fail the same way.
func (c *Client) stopOnTLS(err error) {
	e := &tlsStop{err: err}
	if c.tlsErr.CompareAndSwap(nil, e) {
		c.out.printf("retries feed: stopping: TLS: %v\n", err)
		c.running.Load().stop(e)
	}
}

// holdBack reports op, which is not sent because an earlier operation on
// its document failed: sent now, it would overtake that one when the
// failed operations are fed again. c.mu is held.
func (c *Client) holdBack(op *operation) {
	c.heldBack++
	c.failed.Add(1)
	c.out.printf("retries feed: not sent: %s: an earlier operation on the document failed\n", op.name())
	c.failedOut.write(op)
	c.tell(op.public(), Result{}, &Error{Err: ErrHeldBack})
}

// send sends op to an endpoint through the retrying clients, reports a
// failure, and reports whether op was acknowledged. When its endpoint
// fails and moves it away, it goes to another.
func (c *Client) send(ctx context.Context, op *operation) (ok bool) {
	ok, _ = c.sendOp(ctx, op, true)
	return ok
}

// sendOp is send, which also returns the operation's state: its Result
// and *Error.
func (c *Client) sendOp(ctx context.Context, op *operation, ofFeed bool) (ok bool, state *opState) {
	ctx, state, cancel := withOpState(ctx)
	state.ofFeed = ofFeed
	defer cancel(nil)
	// An interrupt ends the operation unless a request of it is on the
	// wire; then as that request leaves it.
	c.live.add(state)
	defer c.live.remove(state)
	if !op.safe && c.cfg.BeforeUnsafe != nil {
		if err := c.cfg.BeforeUnsafe(ctx, op.public()); err != nil {
			if errors.Is(err, ErrNotSent) { // the caller keeps it
				state.err = &Error{Err: err}
				if state.ofFeed {
					c.tell(op.public(), Result{}, state.err)
				}
				return true, state
			}
			if ctx.Err() == nil {
				state.maybeApplied.Store(true) // by an earlier feed
			} else {
				err = context.Cause(ctx)
			}
			c.fail(op, err, state, 0)
			return false, state
		}
	}
	if c.cfg.Timeout > 0 {
		defer c.pause.withTimeout(cancel, c.cfg.Timeout)()
	}
	for {
		e := c.route(state.failedOn)
		e.sent.Add(1)
		e.ops.Add(1)
		stay, leave := e.within(ctx, state)
		ok, moved := c.sendTo(stay, e, op, state)
		leave()
		e.ops.Add(-1)
		if !moved || ctx.Err() != nil {
			if moved { // the operation's own context ended as it moved
				c.fail(op, context.Cause(ctx), state, 0)
			}
			return ok, state
		}
	}
}

// sendTo sends op to e, and reports whether it was acknowledged, or moved
// away before an answer (and not reported).
func (c *Client) sendTo(ctx context.Context, e *endpoint, op *operation, st *opState) (ok, moved bool) {
	var body io.Reader
	gzipped := false
	if op.body != nil {
		var b []byte
		b, gzipped = wireBody(op.body, c.cfg.Compression)
		body = bytes.NewReader(b)
	}
	target := e.base + op.path
	if c.params != "" {
		sep := "?"
		if strings.Contains(op.path, "?") {
			sep = "&"
		}
		target += sep + c.params
	}
	req, err := http.NewRequestWithContext(ctx, op.kind.method(), target, body)
	if err != nil {
		c.fail(op, err, st, 0)
		return false, false
	}
	for name, vs := range c.cfg.Header {
		req.Header[name] = vs
	}
	if h := c.cfg.Header.Get("Host"); h != "" {
		req.Host = h
	}
	// Shared, never modified: no allocation per request.
	if op.body != nil {
		req.Header["Content-Type"] = jsonContentType
	}
	if gzipped {
		req.Header["Content-Encoding"] = gzipEncoding
	}
	client := e.safeOps
	if !op.safe {
		client = e.unsafeOps
	}
	resp, err := client.Do(req)
	if errors.Is(err, errMoved) { // nothing of it was on the wire when it moved
		return false, true
	}
	if err != nil {
		// The report names the operation; the client's *url.Error would
		// name its URL again.
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err
		}
		// An outage that outlasted MaxOutage, or a TLS error elsewhere,
		// is the whole story; a timeout is named by the error itself (the
		// context's cause).
		cause := context.Cause(ctx)
		if errors.As(cause, new(*outageError)) || errors.As(cause, new(*tlsStop)) {
			err = cause
		}
		if isTLSError(err) {
			c.stopOnTLS(err)
		}
		status := 0
		var refused *refusedAfter
		if errors.As(err, &refused) {
			status = refused.status
		}
		if c.detour(ctx, e, op, st, nil, err) || c.redial(ctx, op, st, err) {
			return false, true
		}
		c.fail(op, err, st, status)
		return false, false
	}
	if resp.StatusCode/100 == 2 {
		// Nothing in a success is read: drain it (bounded) so that the
		// connection is reused, without a buffer of its own.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
		return c.succeeded(op, st, resp.StatusCode), false
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		c.condFailed.Add(1) // an answer: the condition was not met
	case resp.StatusCode == http.StatusNotFound && op.kind == Remove:
		c.notFound.Add(1) // an answer: there was nothing to remove
	case c.detour(ctx, e, op, st, resp, nil):
		return false, true
	default:
		msg := message(data, c.wire.secrets)
		if c.cfg.TraceLevel > 0 {
			if tr := trace(data, c.wire.secrets); tr != "" {
				msg += "; trace: " + tr
			}
		}
		c.fail(op, fmt.Errorf("%s: %s", resp.Status, msg), st, resp.StatusCode)
		c.noteRefusal(op, resp.StatusCode, msg, data)
		return false, false
	}
	return c.succeeded(op, st, resp.StatusCode), false
}

// The header values of every request with a body, shared.
var (
	jsonContentType = []string{"application/json"}
	gzipEncoding    = []string{"gzip"}
)

// succeeded counts op as acknowledged, and reports true.
func (c *Client) succeeded(op *operation, st *opState, status int) bool {
	c.ok.Add(1)
	if !c.acked.Load() {
		c.acked.Store(true)
	}
	st.result = Result{Status: status, Attempts: int(st.attempts.Load())}
	if st.ofFeed {
		c.tell(op.public(), st.result, nil)
	}
	return true
}

// fail reports op as failed with err, and writes it to Config.Failed, or,
// when it is not safe to repeat and one of its requests (st's) may have
// been applied, to Config.Unknown.
func (c *Client) fail(op *operation, err error, st *opState, status int) {
	st.result = Result{Status: status, Attempts: int(st.attempts.Load())}
	if run := c.running.Load().ctx; st.attempts.Load() == 0 && run.Err() != nil && errors.Is(err, stopCause(run)) {
		st.err = &Error{Err: ErrNotSent}
		c.mu.Lock()
		c.unsent = append(c.unsent, op) // reported, written and told at the end
		c.mu.Unlock()
		return
	}
	unknown := st.unknown(op)
	st.err = &Error{Status: status, Unknown: unknown, Err: err}
	c.failed.Add(1)
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
	if unknown {
		c.unknown.Add(1)
		c.out.printf("retries feed: failed: %s: %v; the outcome is unknown: it may have been applied\n", op.name(), err)
		c.unknownOut.write(op)
	} else {
		c.out.printf("retries feed: failed: %s: %v\n", op.name(), err)
		c.failedOut.write(op)
	}
	if st.ofFeed {
		c.tell(op.public(), st.result, st.err)
	}
}

// message returns the "message" of a document/v1 error body, or the body
// itself, on one line (its runs of white space made one space), with the
// header values the feed sends redacted by secrets, cut short.
func message(body []byte, secrets *strings.Replacer) string {
	var v struct {
		Message string `json:"message"`
	}
	s := string(body)
	if json.Unmarshal(body, &v) == nil && v.Message != "" {
		s = v.Message
	}
	s = strings.Join(strings.Fields(secrets.Replace(s)), " ")
	if s == "" {
		return "(empty body)"
	}
	return cut(s, maxMessage)
}

// redactor returns a Replacer of the values of h, and of each of their
// words of at least minSecret bytes (the token of "Bearer TOKEN"), with
// "[redacted]", longest first: a server may quote a header it was sent
// in an error body, and a report quotes error bodies.
func redactor(h http.Header) *strings.Replacer {
	var secrets []string
	for _, vs := range h {
		for _, v := range vs {
			secrets = append(secrets, v)
			for _, w := range strings.Fields(v) {
				if len(w) >= minSecret && w != v {
					secrets = append(secrets, w)
				}
			}
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, v := range slices.Compact(secrets) {
		if len(v) >= minSecret {
			pairs = append(pairs, v, "[redacted]")
		}
	}
	return strings.NewReplacer(pairs...)
}

// minSecret is the length from which a header value, or a word of one, is
// redacted where a report quotes a response: shorter ones ("1", "gzip")
// would blank out ordinary words.
const minSecret = 6

// maxTrace bounds the part of a trace quoted in a report.
const maxTrace = 2000

// trace returns the "trace" of a document/v1 response body as JSON, cut
// short, or "".
func trace(body []byte, secrets *strings.Replacer) string {
	var v struct {
		Trace json.RawMessage `json:"trace"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Trace) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, v.Trace) != nil {
		return ""
	}
	return cut(secrets.Replace(b.String()), maxTrace)
}

// requestParams encodes the document/v1 request parameters of cfg, as
// Vespa's clients send them: the timeout in milliseconds ("5000ms").
func requestParams(cfg Config) string {
	q := url.Values{}
	if cfg.ServerTimeout > 0 {
		q.Set("timeout", strconv.FormatInt(cfg.ServerTimeout.Milliseconds(), 10)+"ms")
	}
	if cfg.Route != "" {
		q.Set("route", cfg.Route)
	}
	if cfg.TraceLevel > 0 {
		q.Set("tracelevel", strconv.Itoa(cfg.TraceLevel))
	}
	if cfg.DryRun {
		q.Set("dryRun", "true")
	}
	return q.Encode()
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// lockedWriter serialises the lines written to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
