// Package query sends Vespa queries to one or more container endpoints as a
// client must: the caller's deadline travels as Vespa's timeout, a
// request is made again only where asking again can change the answer,
// and the answer comes back typed (hits, total count, coverage and why it
// is partial, the errors Vespa returned, which endpoint answered, and how
// many requests it took).
//
// # The deadline
//
// A query's timeout is what is left of its context's deadline less a
// margin (the fastest recent round trip, at least Config.MinMargin and at
// most a quarter of what is left), so that the container gives up, and answers, before
// the caller does; no request leaves once too little is left. Without a
// deadline, Vespa's default (0.5 s, or the query's own timeout) applies,
// and a request waits at most that and a second.
//
// # What is asked again
//
// The retries come from [retries.Query], pyvespa's QUERY: at most 5
// requests, waits with full jitter. Its predicate, any error, is narrowed
// to what asking again can change: a connection error, a 503 (no search
// thread free), a 504 (a timeout with no hits) and a 429; each retry goes
// to the next endpoint. Its waits are scaled from 1.5 s to a query's time
// (50 ms doubling, at most 1 s): Vespa's default timeout is 0.5 s. Never
// asked again: a 4xx (an illegal query), a 500 (a "soft doomed" one is the
// query's own length, vespa#34008), and a 200, whatever errors or partial
// coverage it carries, which is returned as it is; except that a 5xx from
// an endpoint whose breaker is open (see Outliers) is the endpoint's
// failure, not the query's, and goes to another. Retries are bounded by
// a [retries.Budget] (5 % of queries by default) and by the deadline: no
// retry starts once less is left than a query takes (the median round
// trip). An endpoint that answered 503 or 429 is avoided for a second, and
// a retry or a hedge does not go when every endpoint is: under overload a
// query costs one request.
//
// # Hedging
//
// A query still unanswered after the 97th percentile of recent round trips
// (Config.HedgeQuantile) is sent to another endpoint too, the first
// result taken and the other request canceled, as "The Tail at Scale"
// defers its hedges: about three queries in a hundred cost a second
// request, and the hedges spend the same budget as the retries, so that
// together they stay within it. At the 95th percentile the hedges alone
// spent the whole 5 % budget, which then refused the very hedges the tail
// needed (docs/query.md: p99.9 3.3 to 8.8 times lower than without
// hedging over six runs at the 95th, 8.6 to 8.9 times at the 97th). A 503
// or a 429 from any endpoint stops hedging for a second: never hedge into
// overload. An answer that asking again cannot change (a 400, say) ends
// the query at once, whichever request it came from.
//
// # Outliers
//
// An endpoint that answered 503 or 429, or refused a connection, is
// avoided for a second; one whose average round trip is three times the
// endpoints' median (and 5 ms more) is avoided for 5 s, then tried again
// from scratch. Its queries are shared evenly by the others meanwhile.
//
// Each endpoint has a [retries.Breaker], which opens while the endpoint
// fails most requests (refused connections, 500s and 502s, a request left
// unanswered at its deadline, a 200 that is no Vespa result such as a
// proxy's page; but not 503s, 504s or soft doomed 500s, which say nothing
// of whether it works): 5 in a row, or 15 of the last 20. Its queries then go to the others at once,
// in one request each; a query now and then is its probe (50 ms after it
// opened, then at intervals doubling to 1 s, or 100 ms at most after a
// probe answered with a 5xx), asked again elsewhere if the probe fails,
// and the first probe that succeeds closes it. When every breaker is open
// a query fails at once with an error matching [retries.ErrBreakerOpen].
// The root package's [retries.Limiter] is not used: see docs/query.md.
//
// # One URL
//
// With one URL, as a load balancer or Vespa Cloud gives, a 503 is one
// container's: retries and hedges go to the same URL, every other request
// of a query on a pool of connections of its own, which the balancer may
// send to another container. The budget bounds them as it bounds the
// others.
package query

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// Config says where a Client sends queries, and how.
type Config struct {
	// URLs are the container endpoints, such as http://localhost:8080; a
	// query goes to the next in turn, and each retry to the one after.
	URLs   []string
	Header http.Header // sent with every request
	TLS    *tls.Config // for https URLs; nil: Go's defaults
	// HTTP2 speaks HTTP/2: by prior knowledge on http URLs, by ALPN on
	// https. A connection then carries every request to its endpoint, and
	// a hedge goes to another endpoint, on a connection of its own.
	HTTP2 bool
	// Transport, if not nil, sends the requests instead of a clone of
	// http.DefaultTransport (TLS is then ignored).
	Transport http.RoundTripper
	// MinMargin is the least time kept between the timeout sent and the
	// caller's deadline; 0: 5 ms.
	MinMargin time.Duration
	// Budget bounds the retries and the hedges together; nil:
	// retries.NewBudget(0.05, 1), 5 % of the queries and one a second.
	Budget *retries.Budget
	// Calls, if not nil, observes the calls of the client's policy
	// ([DefaultPolicy], named Query): a query's duration, its retries
	// and their waits, as for any policy.
	Calls *retries.Observer
	// NoHedge turns hedging off. HedgeQuantile is the quantile of recent
	// round trips after which a query still unanswered is sent to another
	// endpoint too; 0: 0.97 (see the package documentation).
	NoHedge       bool
	HedgeQuantile float64
}

// Query is one query: its request parameters (yql, hits, ranking, …),
// sent in the URL of a GET to /search/, or, with Body, a JSON query
// POSTed there. The client sets its timeout.
type Query struct {
	// Path is the handler's path; "": /search/.
	Path   string
	Params url.Values
	// Body, if not nil, is a JSON object holding the query; Params are
	// then sent in the URL beside it.
	Body []byte
	// RawQuery, if not "", is a query string sent as it is written, before
	// Params: a ";" or a "%" that starts no escape included, which
	// url.Values cannot hold (url.Query drops such a pair), as
	// vespa-fbench sends the lines of its query file. Only what a request
	// line cannot carry (white space, control bytes, bytes beyond ASCII) is
	// escaped. A timeout in it counts as one in Params.
	RawQuery string
}

// Client sends queries. It is safe for concurrent use by multiple
// goroutines.
type Client struct {
	cfg       Config
	eps       []*endpoint
	next      atomic.Uint64
	http      *http.Client
	spare     *http.Client // with one URL, its retries' and hedges' connections; else http
	policy    retries.Policy
	rtt       rtts
	lat       latencies    // of the answers with a result: the hedge's delay
	noHedging atomic.Int64 // hedging is paused until then, as UnixNano: a 503 or 429 was seen
	stats     counts
}

// Stats are a Client's counts since New.
type Stats struct {
	Queries   int64 // Search calls
	Requests  int64 // requests sent, retries and hedges included
	Retries   int64 // requests sent again after an answer or an error
	Hedges    int64 // hedges sent
	HedgesWon int64 // of them, those whose answer was taken
	Refused   int64 // hedges the budget refused
	Ejected   int64 // times an endpoint much slower than the others was avoided
	// Results are the queries answered with a result (a 200), of which
	// Incomplete carried errors or a partial coverage, and Degraded counts
	// those by the reasons their coverage gives ("timeout", …: each of
	// Degraded's fields, 0 included, and each name of Degraded.Other met);
	// Failed are the queries that ended otherwise.
	Results, Incomplete, Failed int64
	Degraded                    map[string]int64
	// Endpoints are what the Client knows of each endpoint, in the order
	// of Config.URLs.
	Endpoints []EndpointStats
}

type counts struct {
	queries, requests, retries, hedges, hedgesWon, refused atomic.Int64
	ejected                                                atomic.Int64
	results, incomplete, failed                            atomic.Int64
	degraded                                               [len(degradedNames)]atomic.Int64 // by degradedNames
	other                                                  sync.Map                         // a reason of Degraded.Other → *atomic.Int64
}

// Stats returns the Client's counts since New.
func (c *Client) Stats() Stats {
	k := &c.stats
	s := Stats{Queries: k.queries.Load(), Requests: k.requests.Load(), Retries: k.retries.Load(), Hedges: k.hedges.Load(),
		HedgesWon: k.hedgesWon.Load(), Refused: k.refused.Load(), Ejected: k.ejected.Load(), Results: k.results.Load(),
		Incomplete: k.incomplete.Load(), Failed: k.failed.Load(), Degraded: map[string]int64{}, Endpoints: c.endpointStats()}
	for i, r := range degradedNames {
		s.Degraded[r] = k.degraded[i].Load()
	}
	k.other.Range(func(r, n any) bool {
		s.Degraded[r.(string)] = n.(*atomic.Int64).Load()
		return true
	})
	return s
}

// count counts how a query ended.
func (k *counts) count(res *Result, err error) {
	if err != nil {
		k.failed.Add(1)
		return
	}
	k.results.Add(1)
	if res.Complete() {
		return
	}
	k.incomplete.Add(1)
	if d := res.Coverage.Degraded; d != nil {
		for i, set := range d.flags() {
			if *set {
				k.degraded[i].Add(1)
			}
		}
		for _, r := range d.Other {
			n, _ := k.other.LoadOrStore(r, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}
}

// hedgePause is how long a 503 or a 429 stops hedging: never hedge into
// overload.
const hedgePause = time.Second

// defaultTimeout is Vespa's timeout for a query that sets none.
const defaultTimeout = 500 * time.Millisecond

// maxBody bounds the body read of an answer.
const maxBody = 64 << 20

// DefaultPolicy is the policy of a Client's requests, less its budget:
// retries.Query asking again only after a connection error, a 429, a 503
// or a 504, waiting U(0, min(1 s, 50 ms·2^(n−1))), and returning the last
// outcome when it gives up.
var DefaultPolicy = retries.Query.Copy(
	retries.WithRetry(retries.RetryAny(retries.RetryIfError(retries.IsConnectionError), retries.RetryIfStatus(429, 503, 504))),
	retries.WithWait(retries.WaitRandomExponential(retries.Exponential{Multiplier: 50 * time.Millisecond, Max: time.Second})),
	retries.WithReraise(true))

// New returns a Client for cfg, or an error if it has no URL or one that
// is not an http or https URL with a host.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("query: no URL")
	}
	c := &Client{cfg: cfg}
	for _, s := range cfg.URLs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("query: URL %q: want http://HOST[:PORT] or https://…", s)
		}
		if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/search") {
			return nil, fmt.Errorf("query: URL %q ends with /search/, which each query's path adds (/search/search/ would be asked): give the container's root, such as %s://%s", s, u.Scheme, u.Host)
		}
		c.eps = append(c.eps, newEndpoint(s, u))
	}
	if c.cfg.MinMargin <= 0 {
		c.cfg.MinMargin = 5 * time.Millisecond
	}
	if c.cfg.Budget == nil {
		c.cfg.Budget = retries.NewBudget(0.05, 1)
	}
	rt := cfg.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg.TLS
		t.MaxIdleConnsPerHost = 256
		if cfg.HTTP2 {
			var pr http.Protocols
			pr.SetHTTP2(true)
			pr.SetUnencryptedHTTP2(true)
			t.Protocols = &pr
		}
		rt = t
	}
	c.http = &http.Client{Transport: rt}
	c.spare = c.http
	if t, ok := rt.(*http.Transport); ok && len(c.eps) == 1 {
		// One URL, as a load balancer gives: a retry or a hedge goes to it
		// on connections of their own, which the balancer may send to
		// another container than the one that failed or is slow.
		c.spare = &http.Client{Transport: t.Clone()}
	}
	c.lat.q = cfg.HedgeQuantile
	if c.lat.q <= 0 || c.lat.q >= 1 {
		c.lat.q = 0.97
	}
	// Before the wait: a retry that no endpoint may take (every one
	// avoided or down) ends the query now, with the answer it has, rather
	// than after a wait for nothing.
	noneOnward := retries.StopIf(func(retries.State) bool { _, ok := c.onward(0, time.Now().UnixNano()); return !ok })
	c.policy = DefaultPolicy.Copy(retries.WithRetry(retryAnswer), retries.WithWait(retryWait),
		retries.WithStop(retries.StopAny(DefaultPolicy.Stop(), noneOnward)),
		retries.WithBudget(c.cfg.Budget), retries.WithObserver(cfg.Calls))
	return c, nil
}

// Search sends q and returns the container's result: a *Result for a 200,
// whatever errors or partial coverage it carries (see Result.Complete);
// otherwise an error, a *StatusError for another status. See the package
// documentation for what is asked again.
func (c *Client) Search(ctx context.Context, q Query) (*Result, error) {
	r := &route{c: c, first: int(c.next.Add(1) - 1)}
	r.next = r.first
	deadline, _ := ctx.Deadline() // zero: none
	p := c.policy
	if !deadline.IsZero() {
		p = p.Copy(retries.WithStop(retries.StopAny(p.Stop(), retries.StopIf(func(s retries.State) bool {
			// At the retry: what is left must hold a query (the median
			// round trip) and the margin.
			at := time.Now().Add(s.Wait)
			return deadline.Sub(at) < max(c.rtt.median(), c.margin(deadline, at)+time.Millisecond)
		}))))
	}
	c.stats.queries.Add(1)
	var lastErr error
	res, err := retries.DoValue(ctx, p, func(ctx context.Context) (*Result, error) {
		r, err := c.attempt(ctx, q, r, deadline)
		if errors.Is(err, errAllBusy) && lastErr != nil {
			return nil, retries.Permanent(lastErr) // no retry into overload: the last answer stands
		}
		lastErr = err
		return r, err
	})
	c.stats.count(res, err)
	var se *StatusError
	switch {
	case res != nil:
		res.Requests = r.requests
	case errors.As(err, &se): // its Endpoint is the one that answered
		se.Requests = r.requests
	}
	return res, err
}

// Close closes the Client's idle connections. Queries in flight go on;
// the Client is not to be used after Close.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
	c.spare.CloseIdleConnections()
}

// route chooses the endpoints of one query's requests, and counts them.
type route struct {
	c           *Client
	first, next int // the query's turn, and where the next retry or hedge looks first
	requests    int
}

// Kinds of request, for route.pick.
const (
	firstRequest = iota // a query's first
	redirected          // a first request its endpoint's open breaker refused
	retry               // a request sent again after an answer or an error
	hedge
)

// pick returns the endpoint of the next request of kind, and counts the
// request, or reports false when none may go.
//
// An endpoint is avoided while it answers 503 or 429, refuses
// connections, or is much slower than the others (outlier.go), and down
// while its breaker is open. A first request goes to its turn's endpoint
// unless it is avoided; then to one of the others neither avoided nor
// down, in turn too, so that they share its queries evenly; and when every
// endpoint is, to its turn's endpoint all the same: a query is asked at
// least once. Going to a down endpoint is how its breaker probes it: it
// lets one request through when a probe is due and refuses the others at
// once, which are redirected, to an endpoint neither avoided nor down, or
// else to one avoided but up. A retry or a hedge goes only to an endpoint
// neither avoided nor down: asking again would only add to an overload.
func (r *route) pick(kind int) (int, bool) {
	c := r.c
	n, now := len(c.eps), time.Now().UnixNano()
	usable := func(j int) bool { return !c.avoided(j, now) && c.eps[j].up() }
	i := -1
	switch kind {
	case firstRequest, redirected:
		turn := r.first % n
		if kind == firstRequest && !c.avoided(turn, now) {
			i = turn
			break
		}
		var ok, up []int
		for j := range n {
			switch {
			case usable(j):
				ok = append(ok, j)
			case c.eps[j].up():
				up = append(up, j)
			}
		}
		switch {
		case len(ok) > 0:
			i = ok[r.first%len(ok)]
		case kind == firstRequest:
			i = turn
		case len(up) > 0:
			i = up[r.first%len(up)]
		}
	case retry, hedge:
		if j, ok := c.onward(r.next, now); ok {
			i = j
		}
	}
	if i < 0 {
		return 0, false
	}
	r.next = i + 1
	r.requests++
	c.stats.requests.Add(1)
	if kind == retry {
		c.stats.retries.Add(1)
	}
	return i, true
}

// onward returns the endpoint a retry or a hedge goes to at now, the
// first from next on neither avoided nor down; with one URL, a load
// balancer's, whose 503 is one container's, that URL while it is up (the
// request goes on the spare connections). False: none may take it.
func (c *Client) onward(next int, now int64) (int, bool) {
	n := len(c.eps)
	if n == 1 {
		return 0, c.eps[0].up()
	}
	for k := range n {
		if j := (next + k) % n; !c.avoided(j, now) && c.eps[j].up() {
			return j, true
		}
	}
	return 0, false
}

// unsent uncounts a request of kind that its endpoint's breaker refused.
func (r *route) unsent(kind int) {
	r.requests--
	r.c.stats.requests.Add(-1)
	if kind == retry {
		r.c.stats.retries.Add(-1)
	}
}

// attempt sends q to the next endpoint, and, if no answer has come after
// the hedge's delay, to the one after too, when hedging is on, not paused
// by a 503 or 429, there is another endpoint, time is left for it and the
// budget allows: the first result wins and the other request is canceled.
// An answer that asking again cannot change ends the attempt at once; one
// that it can (a 503, say) waits for the other request, if any. A request
// that an open breaker refused goes to another endpoint at once, neither
// counted nor paid for. The policy around it (Search) asks again.
func (c *Client) attempt(ctx context.Context, q Query, r *route, deadline time.Time) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &race{c: c, ctx: ctx, q: q, r: r, deadline: deadline, answers: make(chan reply, 3)}
	kind := retry
	if r.requests == 0 {
		kind = firstRequest
	}
	if !h.launch(kind) {
		return nil, errAllBusy
	}
	var hedgeAt <-chan time.Time
	if d, ok := c.lat.get(); ok && !c.cfg.NoHedge {
		t := time.NewTimer(d)
		defer t.Stop()
		hedgeAt = t.C
	}
	var last reply
	for h.pending > 0 {
		select {
		case <-hedgeAt:
			hedgeAt = nil
			h.hedge()
		case a := <-h.answers:
			h.pending--
			switch {
			case a.err == nil:
				return c.won(a), nil
			case errors.Is(a.err, retries.ErrBreakerOpen):
				if !h.refused(a) && last.err == nil {
					a.err = errEveryDown
					last = a
				}
				continue
			}
			c.learn(a)
			if a.kind == hedge && errors.Is(a.err, ErrNoTimeLeft) {
				continue // the hedge found no time left to go: the first request stands
			}
			if last.err == nil || !errors.Is(a.err, context.Canceled) {
				last = a
			}
			if !retryable(a.err) {
				return nil, a.err // the other request's answer would be the same
			}
			hedgeAt = nil // retried by the policy, not hedged
		}
	}
	return nil, last.err
}

// reply is what came of one request of an attempt: a result or an error,
// from endpoint i, sent as kind (firstRequest, retry, hedge, redirected).
type reply struct {
	res  *Result
	err  error
	i    int
	kind int
}

// race is one attempt's requests: the first, a hedge, and a request
// redirected from an endpoint whose breaker refused it. It lives on the
// attempt's goroutine; each request answers on answers.
type race struct {
	c        *Client
	ctx      context.Context
	q        Query
	r        *route
	deadline time.Time
	answers  chan reply
	pending  int // requests sent and not yet answered
}

// launch sends a request of kind to the endpoint the route picks, and
// reports whether one could go.
func (h *race) launch(kind int) bool {
	i, ok := h.r.pick(kind)
	if !ok {
		return false
	}
	h.pending++
	spare := h.r.requests%2 == 0 // with one URL, every other request on the spare connections
	go func() {
		res, err := h.c.send(h.ctx, i, h.q, h.deadline, spare)
		h.answers <- reply{res, err, i, kind}
	}()
	return true
}

// hedge sends a hedge, if it may go now and the budget pays for it.
func (h *race) hedge() {
	c := h.c
	if !c.mayHedge(h.deadline) {
		return
	}
	if !c.cfg.Budget.Spend() {
		c.stats.refused.Add(1)
		return
	}
	if h.launch(hedge) {
		c.stats.hedges.Add(1)
	} else {
		c.cfg.Budget.Deposit() // no endpoint to hedge to
	}
}

// refused uncounts a request that its endpoint's breaker refused, and
// sends the attempt's first request to another endpoint when it was the
// only one pending: it reports whether one went.
func (h *race) refused(a reply) bool {
	h.r.unsent(a.kind)
	if a.kind == hedge {
		h.c.stats.hedges.Add(-1)
		return false
	}
	return h.pending == 0 && h.launch(redirected)
}

// won returns the winning answer's result, with its endpoint.
func (c *Client) won(a reply) *Result {
	if a.kind == hedge {
		c.stats.hedgesWon.Add(1)
	}
	a.res.Endpoint, a.res.Hedged = c.eps[a.i].name, a.kind == hedge
	return a.res
}

// learn takes what a failed answer says of its endpoint: its name and
// whether it is down on the error, and, for an overload (503, 429), a
// probe's fault, a refused connection or no answer, the endpoint avoided
// for a while (and hedging paused, for an overload).
func (c *Client) learn(a reply) {
	var se *StatusError
	var ef *endpointFault
	switch {
	case errors.As(a.err, &se):
		se.Endpoint = c.eps[a.i].name
		se.down = se.Status >= 500 && !neutral.Match(nil, a.err) && !c.eps[a.i].up() // a failure of the endpoint, as its breaker counts them
		if busy(se.Status) {
			c.noHedging.Store(time.Now().Add(hedgePause).UnixNano())
			c.avoidFor(a.i, hedgePause)
		}
	case errors.As(a.err, &ef):
		ef.down = !c.eps[a.i].up() // a probe's: the query goes to another endpoint
		c.avoidFor(a.i, hedgePause)
	case retries.IsConnectionError(a.err) || errors.Is(a.err, errNoAnswer):
		c.avoidFor(a.i, hedgePause)
	}
}

// margin is the time kept between a request's timeout and the deadline,
// for a request sent at now.
func (c *Client) margin(deadline, now time.Time) time.Duration {
	return c.rtt.margin(c.cfg.MinMargin, deadline.Sub(now))
}

// mayHedge reports whether a hedge may go now: hedging is not paused, and
// the deadline leaves time for it.
func (c *Client) mayHedge(deadline time.Time) bool {
	now := time.Now()
	if now.UnixNano() < c.noHedging.Load() {
		return false
	}
	_, err := timeout(deadline, now, c.margin(deadline, now))
	return err == nil
}

// errEveryDown is a query that no endpoint may be asked for: every
// breaker is open.
var errEveryDown error = everyDown{}

type everyDown struct{}

func (everyDown) Error() string {
	return "query: every endpoint is failing: their circuit breakers are open"
}
func (everyDown) Is(target error) bool { return target == retries.ErrBreakerOpen }

// errAllBusy is an attempt that could not go: every endpoint is avoided.
var errAllBusy = errors.New("query: every endpoint is busy")

// retryAnswer is what a Client asks again: what DefaultPolicy retries,
// and an answer from an endpoint whose breaker is open (a 500 from a
// broken container, say), which another endpoint may answer.
var retryAnswer = retries.RetryAny(DefaultPolicy.Retry(), retries.RetryIfError(endpointDown))

// retryWait is DefaultPolicy's wait, but none after an answer from an
// endpoint whose breaker is open: the retry goes to another, which has
// not failed.
var retryWait = retries.WaitFunc(func(s retries.State) time.Duration {
	if endpointDown(s.Err) {
		return 0
	}
	return DefaultPolicy.Wait().Duration(s)
})

// endpointDown reports whether err is an answer from an endpoint whose
// breaker is open.
func endpointDown(err error) bool {
	var se *StatusError
	var ef *endpointFault
	return errors.As(err, &se) && se.down || errors.As(err, &ef) && ef.down
}

// retryable reports whether asking again may change the answer err: what
// the Client's policy retries.
func retryable(err error) bool { return retryAnswer.Match(nil, err) }

// busy reports whether status says the container serves no more: a 503
// (no search thread free) or a 429.
func busy(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// send makes one request of q to endpoint i, through its breaker.
// Without a deadline, nothing waits for ever: the request lasts at most
// the query's timeout and a second (ask).
//
// The breaker judges the request by what the container did: the caller's
// deadline does not end the breaker's call (its end would make the
// outcome neutral); the request's own timer (ask), set to the same
// deadline, does, and a container that had not answered by then failed.
// A cancel (a hedge won, the caller gave up) ends it at once, neutral.
func (c *Client) send(ctx context.Context, i int, q Query, deadline time.Time, spare bool) (*Result, error) {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})()
	return c.eps[i].do(bctx, func(ctx context.Context) (*Result, error) { return c.ask(ctx, i, q, deadline, spare) })
}

// ask makes one request of q to endpoint i, with what is left of the
// deadline as the query's timeout, on the spare connections if spare.
func (c *Client) ask(ctx context.Context, i int, q Query, deadline time.Time, spare bool) (*Result, error) {
	endpoint := c.eps[i].url
	start := time.Now()
	t, err := timeout(deadline, start, c.margin(deadline, start))
	if err != nil {
		return nil, retries.Permanent(err)
	}
	req, err := c.request(ctx, endpoint, q, t)
	if err != nil {
		return nil, retries.Permanent(err)
	}
	// The container answers by the timeout it was sent (with what it has
	// then): at the deadline (the timeout and the margin), or without one
	// past its timeout and a second, it is not answering, which its
	// breaker counts.
	wait := queryTimeout(q) + time.Second
	if !deadline.IsZero() {
		wait = deadline.Sub(start)
	}
	rctx, stop := context.WithTimeoutCause(ctx, wait, errNoAnswer)
	defer stop()
	hc := c.http
	if spare {
		hc = c.spare
	}
	resp, err := hc.Do(req.WithContext(rctx))
	if err != nil {
		return nil, noAnswer(ctx, rctx, err)
	}
	body, err := readBody(resp.Body)
	if err != nil {
		return nil, noAnswer(ctx, rctx, err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		c.rtt.add(took) // an answer, however short: a query's time
		se := &StatusError{Status: resp.StatusCode}
		var r Result
		if parse(body, &r) == nil {
			se.Errors = r.Errors
		}
		return nil, se
	}
	var r Result
	if err := parse(body, &r); err != nil {
		// A 200 that is no Vespa result (a proxy's page): not asked again,
		// but a failure of the endpoint, which its breaker counts.
		return nil, &endpointFault{err: err}
	}
	if d := r.Coverage.Degraded; d == nil || !d.Timeout && !d.AdaptiveTimeout {
		c.rtt.add(took) // one cut by a timeout says nothing of the round trip
		c.lat.add(took)
		c.roundTrip(i, took)
	}
	return &r, nil
}

// request builds the request of q to endpoint, with timeout t (none for
// 0), or the query's own if shorter.
func (c *Client) request(ctx context.Context, endpoint string, q Query, t time.Duration) (*http.Request, error) {
	params := url.Values{}
	for k, v := range q.Params {
		params[k] = v
	}
	raw := q.RawQuery
	body := q.Body
	if t > 0 {
		var rawT string
		var inRaw bool
		raw, rawT, inRaw = cutTimeout(raw)
		if own, ok := parseTimeout(params.Get("timeout")); ok {
			t = min(t, own)
		}
		if own, ok := parseTimeout(rawT); ok && inRaw {
			t = min(t, own)
		}
		if body != nil {
			var err error
			if body, t, err = withTimeout(body, t); err != nil {
				return nil, err
			}
		}
		params.Set("timeout", formatTimeout(t)) // the body's, if it asks for less: the two agree
	}
	path := q.Path
	if path == "" {
		path = "/search/"
	}
	u := endpoint + path
	switch {
	case raw != "" && len(params) > 0:
		u += "?" + sendable(raw) + "&" + params.Encode()
	case raw != "":
		u += "?" + sendable(raw)
	case len(params) > 0:
		u += "?" + params.Encode()
	}
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.cfg.Header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// withTimeout returns the JSON object body with its timeout set to t, or
// kept if it asks for less, and the timeout it then holds.
func withTimeout(body []byte, t time.Duration) ([]byte, time.Duration, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, 0, fmt.Errorf("query: the body is not a JSON object: %w", err)
	}
	if own, ok := jsonTimeout(m["timeout"]); ok && own <= t {
		return body, own, nil
	}
	m["timeout"], _ = json.Marshal(formatTimeout(t))
	b, err := json.Marshal(m)
	return b, t, err
}

// queryTimeout returns the timeout q asks for, or Vespa's default.
func queryTimeout(q Query) time.Duration {
	if t, ok := parseTimeout(q.Params.Get("timeout")); ok {
		return t
	}
	if _, raw, ok := cutTimeout(q.RawQuery); ok {
		if t, ok := parseTimeout(raw); ok {
			return t
		}
	}
	var m struct{ Timeout json.RawMessage }
	if q.Body != nil && json.Unmarshal(q.Body, &m) == nil {
		if t, ok := jsonTimeout(m.Timeout); ok {
			return t
		}
	}
	return defaultTimeout
}

// jsonTimeout reads a JSON query's timeout: a string as parseTimeout reads
// it, or a number of seconds; false for none.
func jsonTimeout(raw json.RawMessage) (time.Duration, bool) {
	if raw == nil {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw) // a number, of seconds
	}
	return parseTimeout(s)
}

// parseTimeout reads a timeout as Vespa does: a number of seconds, or
// with the unit ms or s, spaces allowed.
func parseTimeout(s string) (time.Duration, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	unit := time.Second
	switch {
	case strings.HasSuffix(s, "ms"):
		s, unit = strings.TrimSuffix(s, "ms"), time.Millisecond
	case strings.HasSuffix(s, "s"):
		s = strings.TrimSuffix(s, "s")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 1e6 {
		return 0, false
	}
	return time.Duration(v * float64(unit)), true
}
