package visit

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// Stats are a Client's counts since New, its Visits' together, for
// metrics. Every count only grows, but InFlight and Limit.
type Stats struct {
	Documents int64 // handed out to a Visit's page function
	Dropped   int64 // read again after a cut or a resume, and dropped
	Requests  int64 // sent, every attempt counted, those the retry layers made again included
	Throttled int64 // of them, answered 429: the server served no more visits
	Cut       int64 // of them, a connection cut (reset, EOF) or a stream or a page cut short
	Failed    int64 // of them, failed otherwise: a 5xx, a 4xx, a connection not made, an answer that is no page or moves nothing
	InFlight  int64 // requests in flight now, over every endpoint
	Limit     int64 // the visits the gates let in flight at once, over every endpoint
	// Failing is the cause of the last request that failed, while no
	// request has read anything new since, with the header values sent
	// redacted; FailingFor is how long since the first of those failures.
	// "" and 0 while the requests succeed.
	Failing    string
	FailingFor time.Duration
}

// visitCounts are the counts behind Stats.
type visitCounts struct {
	documents, dropped, requests, throttled, cut, failed atomic.Int64
}

// count counts how a request that the server answered 200 ended, with
// err, after its body was read; ctx is the visit's, whose end is no
// failure. What ended before (an attempt that failed, a status other than
// 200) the wire counted, each attempt the retry layers made.
func (k *visitCounts) count(ctx context.Context, err error) {
	switch {
	case err == nil, errors.Is(err, errStopped), ctx.Err() != nil:
	case errors.Is(err, errCut):
		k.cut.Add(1)
	default:
		k.failed.Add(1)
	}
}

// wire counts every attempt that goes on the wire under the retry
// layers, and how it ended short of a 200: a 429, a cut connection (reset,
// EOF), another failure. An attempt the visit itself ended (its context
// canceled) is no failure.
type wire struct {
	rt http.RoundTripper
	k  *visitCounts
}

func (w wire) RoundTrip(r *http.Request) (*http.Response, error) {
	w.k.requests.Add(1)
	resp, err := w.rt.RoundTrip(r)
	switch {
	case r.Context().Err() != nil:
	case err != nil && (errors.Is(err, io.EOF) || retries.IsConnectionError(err) && !isDial(err)):
		w.k.cut.Add(1)
	case err != nil:
		w.k.failed.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		w.k.throttled.Add(1)
	case resp.StatusCode != http.StatusOK:
		w.k.failed.Add(1)
	}
	return resp, err
}

// isDial reports whether err is a connection that could not be made: a
// failure, not a cut.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Stats returns the client's counts since New.
func (c *Client) Stats() Stats {
	k := &c.counts
	s := Stats{Documents: k.documents.Load(), Dropped: k.dropped.Load(), Requests: k.requests.Load(),
		Throttled: k.throttled.Load(), Cut: k.cut.Load(), Failed: k.failed.Load()}
	s.Failing, s.FailingFor = c.health.state()
	for _, ep := range c.endpoints {
		ep.gate.mu.Lock()
		s.InFlight += int64(ep.gate.inflight)
		s.Limit += int64(ep.gate.limit)
		ep.gate.mu.Unlock()
	}
	return s
}
