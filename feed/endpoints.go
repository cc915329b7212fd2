package feed

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// endpoint is one document/v1 endpoint of a feed, with its own limiter
// and breaker: its capacity and its outages are its own.
type endpoint struct {
	url, base          string            // as given, and without a trailing slash
	multi              bool              // the feed has other endpoints
	header             [3]http.Header    // of its requests, by their body (see requestHeaders)
	safeOps, unsafeOps http.RoundTripper // the retrying clients for operations safe to repeat or not (retrySafe, retryUnsafe)
	limiter            *retries.Limiter
	breaker            *retries.Breaker
	ops                atomic.Int64 // operations on it now
	sent               atomic.Int64 // operations routed to it
	routedAt           atomic.Int64 // when an operation was last routed to it, in Unix nanoseconds

	// word is what the operations that failed on it wait for: its next
	// acknowledgement or its breaker's opening (see awaitWord); nil while
	// none waits.
	word    atomic.Pointer[word]
	waiting atomic.Int64 // operations waiting for its word

	move atomic.Pointer[moveCtx] // canceled to move the operations waiting on this endpoint to others
}

// moveCtx is an endpoint's context that moveAway cancels.
type moveCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newMoveCtx() *moveCtx {
	m := &moveCtx{}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	return m
}

// errMoved is the cause of an operation's detour: its endpoint failed and
// another may take it.
var errMoved = errors.New("moved to another endpoint")

// word is an endpoint's next word on its health: done is closed when it
// acknowledges an operation sent while the word was awaited (opened
// false) or its breaker opens (opened true).
type word struct {
	done   chan struct{}
	opened bool
}

// nextWord returns the endpoint's next word, to wait on.
func (e *endpoint) nextWord() *word {
	for {
		if v := e.word.Load(); v != nil {
			return v
		}
		v := &word{done: make(chan struct{})}
		if e.word.CompareAndSwap(nil, v) {
			return v
		}
	}
}

// opened tells those waiting for e's word that its breaker opened.
func (e *endpoint) opened() {
	if v := e.word.Swap(nil); v != nil {
		v.opened = true
		close(v.done)
	}
}

// acked tells those waiting for e's word that it acknowledged an
// operation whose request went out while seen (e.word then) was awaited;
// one sent before the word was asked for may have been answered as an
// outage began, and says nothing.
func (e *endpoint) acked(seen *word) {
	if seen != nil && e.word.CompareAndSwap(seen, nil) {
		close(seen.done)
	}
}

// Endpoint is one endpoint of a Client and the shared objects that pace
// it, for monitoring (otelretries.RegisterLimiter and RegisterBreaker, say):
// its adaptive limiter (nil with a fixed Config.Concurrency) and its
// breaker. The Client owns them; a caller reads them.
type Endpoint struct {
	URL     string // as given, without a password
	Limiter *retries.Limiter
	Breaker *retries.Breaker
}

// Endpoints returns c's endpoints, in the order of Config.URLs (or the one
// of Config.URL).
func (c *Client) Endpoints() []Endpoint {
	out := make([]Endpoint, len(c.endpoints))
	for i, e := range c.endpoints {
		out[i] = Endpoint{URL: e.redactedURL(), Limiter: e.limiter, Breaker: e.breaker}
	}
	return out
}

// redactedURL is the endpoint's URL without a password, for the summary.
func (e *endpoint) redactedURL() string {
	u, err := url.Parse(e.url)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

// moveAway moves the operations waiting on e to the other endpoints: their
// stays end with errMoved, and the feed routes them again. An operation
// with a request on the wire moves only once that request is answered or
// fails, and then only if the retry rules would send it again.
func (e *endpoint) moveAway() {
	e.move.Swap(newMoveCtx()).cancel(errMoved)
}

// within returns ctx for one operation's stay on e, one of several
// endpoints, which ends with errMoved when e moves its operations away
// (its request on the wire, if any, goes on: see opState), and the
// function that releases it.
func (e *endpoint) within(ctx context.Context) (context.Context, func()) {
	move := e.move.Load().ctx
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(move, func() { cancel(errMoved) })
	return c, func() {
		stop()
		cancel(nil)
	}
}

// probeEvery is how often an endpoint whose breaker is open is given an
// operation while others take the feed, so that its breaker gets a probe.
const probeEvery = time.Second

// route picks the endpoint for the next operation: the least loaded whose
// breaker is closed, or, once a second, one whose breaker is open, so that
// it gets a probe; when every breaker is open, the one routed to longest
// ago, so that the waiting operations spread and every endpoint is probed.
// The endpoints in skip (those that failed the operation, see again;
// never all of them) are left out. It is called with several endpoints
// only.
func (c *Client) route(skip []*endpoint) *endpoint {
	now := time.Now().UnixNano()
	var best, stale *endpoint
	for _, e := range c.endpoints {
		if slices.Contains(skip, e) {
			continue
		}
		if e.breaker.State() == retries.BreakerClosed {
			if best == nil || e.ops.Load() < best.ops.Load() {
				best = e
			}
			continue
		}
		if stale == nil || e.routedAt.Load() < stale.routedAt.Load() {
			stale = e
		}
	}
	switch {
	case best == nil:
		best = stale
	case stale != nil && now-stale.routedAt.Load() >= int64(probeEvery):
		best = stale
	}
	best.routedAt.Store(now)
	return best
}

// endpointsJSON describes each endpoint for the summary, when there are
// several.
func (c *Client) endpointsJSON() any {
	if len(c.endpoints) < 2 {
		return nil
	}
	out := make([]any, len(c.endpoints))
	for i, e := range c.endpoints {
		s := e.breaker.Stats()
		out[i] = map[string]any{
			"url": e.redactedURL(), "operations": e.sent.Load(), "limiter": limiterJSON(e.limiter),
			"breaker": map[string]any{"state": s.State.String(), "opened": s.Opened, "probes": s.Probes},
		}
	}
	return out
}
