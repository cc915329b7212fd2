package query

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// endpoint is what a Client knows of one container endpoint. Its breaker
// opens while the endpoint fails most requests (refused or cut
// connections, a 500 or a 502: 15 of the last 20, or 5 in a row over a
// second), and then lets a request through as a probe now and then (50 ms
// after, doubling to 1 s; 100 ms at most after a probe answered 5xx) until
// one succeeds; meanwhile the endpoint's queries go to the others. What
// says nothing of whether the endpoint works is no failure to it (see
// neutral).
type endpoint struct {
	url    string // as given, for requests
	name   string // as said: url with its password, if any, redacted
	brk    *retries.Breaker
	policy retries.Policy // one attempt, guarded by brk

	avoid atomic.Int64  // until then, as UnixNano: see outlier.go
	ewma  atomic.Uint64 // the round trips' moving average in seconds, as float64 bits; 0 for none yet
	n     atomic.Int64  // round trips in the average
}

// neutral matches the answers that say nothing of whether an endpoint
// works, which its breaker counts neither as failures nor as successes: a
// 503 or a 429 (busy: outlier.go avoids it for a second), a 504 (the
// query's time ran out with no hits: the content nodes behind every
// container are slow, or the deadline is short) and a "soft doomed" 500
// (the query's own length).
var neutral = retries.RetryAny(
	retries.RetryIfStatus(http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusGatewayTimeout),
	retries.RetryIfError(func(err error) bool {
		var se *StatusError
		return errors.As(err, &se) && se.SoftDoomed()
	}))

// newEndpoint returns the endpoint at raw, parsed as u, with its breaker.
func newEndpoint(raw string, u *url.URL) *endpoint {
	e := &endpoint{url: strings.TrimRight(raw, "/"), name: strings.TrimRight(u.Redacted(), "/")}
	e.brk = retries.NewBreaker(retries.BreakerConfig{FailFast: true, Backpressure: neutral})
	e.policy = retries.New(retries.WithBreaker(e.brk), retries.WithReraise(true))
	return e
}

// up reports whether e's breaker is closed: it is not known to fail.
func (e *endpoint) up() bool { return e.brk.State() == retries.BreakerClosed }

// do makes the request fn through e's breaker: it fails at once with an
// error matching retries.ErrBreakerOpen if the breaker is open and no
// probe is due.
func (e *endpoint) do(ctx context.Context, fn func(context.Context) (*Result, error)) (*Result, error) {
	return retries.DoValue(ctx, e.policy, fn)
}

// EndpointStats are what a Client knows of one endpoint.
type EndpointStats struct {
	URL string
	// Breaker is the endpoint's circuit breaker: whether it is open, and
	// how often and for how long it was.
	Breaker retries.BreakerStats
	// Avoided is true while the endpoint gets no query that another can
	// take: it answered 503 or 429, or refused a connection, in the last
	// second, or it is much slower than the others (see the package
	// documentation).
	Avoided bool
}

// endpointStats returns what c knows of each endpoint.
func (c *Client) endpointStats() []EndpointStats {
	now := time.Now().UnixNano()
	s := make([]EndpointStats, len(c.eps))
	for i, e := range c.eps {
		s[i] = EndpointStats{URL: e.name, Breaker: e.brk.Stats(), Avoided: c.avoided(i, now)}
	}
	return s
}
