package feed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/seed32e55400/retries"
)

const (
	// DefaultMaxInFlight is the adaptive limiter's cap when
	// Config.MaxInFlight is 0: at most this many requests in flight, and
	// this many operations dispatched at once. A Feed dispatches fewer:
	// at most 64 beyond the limiters' current limits.
	DefaultMaxInFlight = 1024
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
	URLs   []string
	Header http.Header // sent with every request; never printed
	// Concurrency > 0 fixes the operations in flight, in all over the
	// endpoints, and turns the adaptive limiter off; 0: each endpoint's
	// limiter decides.
	Concurrency int
	MaxInFlight int // the limiter's cap; 0: DefaultMaxInFlight
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
	// BreakerWindow, BreakerFailures and BreakerStreak say when each
	// endpoint's breaker opens: retries.BreakerConfig's Window, Failures
	// and Streak (0: 15 failures of the last 20 requests, or 5 in a row
	// over a second). A server that fails about half its requests opens
	// the default breaker now and then; see docs/feed.md.
	BreakerWindow, BreakerFailures, BreakerStreak int
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
	// Fence, if not nil, says whether the feed may write to Vespa: a
	// Kafka member sends a record only while it owns the record's
	// partition and holds the group's lease (see Fence).
	Fence Fence
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

	Log io.Writer // failures, and progress unless ProgressOut is set, as the command's lines; nil: none
	// LogPrefix begins each line of Log but the progress reports; "":
	// "retries feed: ". The copy command's is "retries copy: the
	// destination: ".
	LogPrefix string
	// Logger, if not nil, receives the feed's events as structured
	// records, for a program that uses the package: each element not
	// acknowledged (at level Warn) with its id, kind, tag, line, status,
	// attempts and outcome (failed, unknown, heldback, notsent, badinput),
	// and the feed's pauses and resumptions (Info) and stops (Error).
	Logger      *slog.Logger
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
	// ProgressKeys, if not nil, adds its keys to each JSON report, after
	// the summary's: a copy's visit side, say. A key of the summary's is
	// left as the summary has it.
	ProgressKeys func() map[string]any
	// Calls, if not nil, observes the calls of both retry layers (the
	// inner Inner, named Throttle by default, and the outer Outer): their
	// attempts, waits, refusals, holds during an outage, and ends.
	Calls *retries.Observer
}

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

// Compression says which request bodies go out gzipped.
type Compression int

const (
	// CompressAuto gzips bodies over compressAbove bytes, as Vespa's
	// clients do.
	CompressAuto Compression = iota
	// CompressNone sends every body as it is.
	CompressNone
	// CompressGzip gzips every body.
	CompressGzip
)

// compressAbove is the body size above which CompressAuto gzips.
const compressAbove = 512

// ParseCompression reads "auto", "gzip" or "none".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "auto":
		return CompressAuto, nil
	case "none":
		return CompressNone, nil
	case "gzip":
		return CompressGzip, nil
	}
	return 0, fmt.Errorf("%q: want auto, gzip or none", s)
}

// Validate returns the error New would return for c, without making a
// Client: an endpoint that is not an http or https URL with a host, or a
// negative BreakerWindow or BreakerFailures.
func (c Config) Validate() error {
	for _, raw := range c.endpoints() {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("URL %q: want http://HOST[:PORT] or https://…", raw)
		}
	}
	if c.BreakerWindow < 0 || c.BreakerFailures < 0 {
		return errors.New("BreakerWindow and BreakerFailures must not be negative")
	}
	return nil
}

// endpoints returns URLs, or URL alone when URLs is empty.
func (c Config) endpoints() []string {
	if len(c.URLs) == 0 {
		return []string{c.URL}
	}
	return c.URLs
}
