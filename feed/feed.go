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
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/internal/redact"
)

// Client sends operations to the document/v1 endpoints of a Config. Its
// limiters, breakers and budget are shared by all its Sends and its Feed.
// A Client is safe for concurrent use by multiple goroutines.
type Client struct {
	cfg              Config
	endpoints        []*endpoint
	params           string // the request parameters of every operation, encoded; "" if none
	transport        *connPool
	openEndpoints    atomic.Int64 // endpoints whose breaker is open or half-open
	pause            pause
	opTimeouts       timeouts                    // Config.Timeout's, held while paused
	attemptTimeouts  *timeouts                   // Config.AttemptTimeout's; nil without one
	outage           atomic.Pointer[outageError] // set when the outage outlasted Config.MaxOutage
	acked            atomic.Bool                 // an operation was acknowledged
	running          atomic.Pointer[run]         // the running Feed's, or nil
	queues           dispatcher                  // the queues per document, the window, the documents held back
	failedOut        *failedWriter               // nil without Config.Failed
	unknownOut       *failedWriter               // Config.Unknown, or failedOut
	wire             wireStats
	out, progressOut *lockedWriter
	total            counts       // since New, Sends included
	refusals         atomic.Int64 // retries the budget refused

	sendSlots chan struct{} // with a fixed concurrency, bounds the Sends in flight
	// soleLimiter is the limiter of the one endpoint, if there is one
	// endpoint with a limiter: a Feed's dispatch takes each operation's
	// first permit from it (see run.dispatch).
	soleLimiter *retries.Limiter
	sends       sync.WaitGroup // the Sends and Feeds running

	mu      sync.Mutex
	feeding bool                  // a Feed runs
	closed  bool                  // Close was called
	last    *Report               // of the last Feed, or nil
	live    map[*opState]struct{} // the Sends being sent, which an outage that outlasts MaxOutage halts

	testWindowWait func(ops int) // for tests: see window.onWait
}

// New returns a Client for cfg, or the error cfg.Validate returns.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	urls := cfg.endpoints()
	cfg = withDefaults(cfg)
	c := &Client{cfg: cfg, out: &lockedWriter{w: cfg.Log, prefix: cmp.Or(cfg.LogPrefix, "retries feed: ")}}
	c.opTimeouts = timeouts{timeout: cfg.Timeout, cause: errTimeout}
	if cfg.AttemptTimeout > 0 {
		c.attemptTimeouts = &timeouts{timeout: cfg.AttemptTimeout, cause: errAttemptTimeout}
	}
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
	c.wire.secrets = redact.New(cfg.Header, urls...)
	c.progressOut = c.out
	if cfg.ProgressOut != nil {
		c.progressOut = &lockedWriter{w: cfg.ProgressOut}
	}
	c.transport = newConnPool(cfg, c.slots(), &c.wire)
	for _, raw := range urls {
		c.endpoints = append(c.endpoints, c.newEndpoint(raw))
	}
	if len(c.endpoints) == 1 {
		c.soleLimiter = c.endpoints[0].limiter
	}
	return c, nil
}

// refusedAfter is the error of an operation whose retry a shared object
// (the budget) refused, after its last outcome: a response's status, or an
// error.
type refusedAfter struct {
	status        int // the last response's, or 0
	last, refusal error
}

func (e *refusedAfter) Error() string { return e.last.Error() + "; " + e.refusal.Error() }

func (e *refusedAfter) Unwrap() []error { return []error{e.last, e.refusal} }

// initialInFlight is where an endpoint's limiter starts: the limiter's
// own 4. At 16 (where vespa feed starts with its default 8 connections),
// which saves two round trips of slow start on a server that takes
// hundreds at once, four feeders sharing a rate-limited server split it
// unevenly when they also compete for CPU: Jain's fairness 0.977 against
// 0.994 at 4, goodput 0.943 against 0.966 (the arena's four-feeder row,
// medians of 12 interleaved rounds with a busy core; 0.990 against 0.996
// without it; see docs/performance.md).
const initialInFlight = 4

// newEndpoint returns the endpoint at raw, with its own limiter and
// breaker and the two retrying clients.
func (c *Client) newEndpoint(raw string) *endpoint {
	cfg := c.cfg
	e := &endpoint{url: raw, base: strings.TrimRight(raw, "/"), multi: len(cfg.URLs) > 1}
	u, _ := url.Parse(raw) // checked by New
	e.header = requestHeaders(cfg.Header, u)
	e.move.Store(newMoveCtx())
	e.breaker = retries.NewBreaker(retries.BreakerConfig{MaxProbeInterval: cfg.MaxProbeInterval,
		Window: cfg.BreakerWindow, Failures: cfg.BreakerFailures, Streak: cfg.BreakerStreak,
		OnStateChange: func(from, to retries.BreakerState) { c.onBreaker(e, from, to) }})
	inner := cfg.Inner.Copy(retries.WithBreaker(e.breaker), retries.WithObserver(cfg.Calls))
	if cfg.Concurrency == 0 {
		e.limiter = retries.NewLimiter(retries.LimiterConfig{MaxInFlight: cfg.MaxInFlight, InitialInFlight: initialInFlight})
		inner = inner.Copy(retries.WithLimiter(e.limiter))
	}
	wire := opWire{pool: c.transport, attempts: c.attemptTimeouts}
	client := func(pred retries.Predicate) http.RoundTripper {
		// The inner layer also retries, while the breaker is open, what
		// the outer one would: it waits the outage out, and the outer
		// layer spends no attempt and no budget on it.
		innerT := retries.NewTransport(wire, inner.Copy(retries.WithRetry(
			retries.RetryAny(inner.Retry(), retries.RetryIfOutage(e.breaker, pred)))))
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
		// Called as a RoundTripper, not through an http.Client: a
		// redirect is reported, not followed (a POST must not turn into a
		// GET), and the client's copies of the URL and the header for
		// redirects cost 6 allocations a request.
		return retries.NewTransport(innerT, p)
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

// lockedWriter serialises the lines written to w.
type lockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string // begins each line of logf
}

// logf writes a line of the log, after the prefix.
func (l *lockedWriter) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s"+format, append([]any{l.prefix}, args...)...)
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
