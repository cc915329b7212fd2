package visit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Stats are a Client's counts since New, its Visits' together, for
// metrics. Every count only grows, but InFlight and Limit.
type Stats struct {
	Documents int64 // handed out to a Visit's page function
	Dropped   int64 // read again after a cut or a resume, and dropped
	Requests  int64 // sent, every one counted
	Throttled int64 // of them, answered 429: the server served no more visits
	Cut       int64 // of them, a stream or a page cut short, taken up again
	Failed    int64 // of them, failed otherwise: a 5xx or an error the layers gave up on, a 4xx
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

// count counts how a request that ended with err ended; ctx is the
// visit's, whose end is no failure.
func (k *visitCounts) count(ctx context.Context, err error) {
	switch {
	case err == nil, errors.Is(err, errStopped), ctx.Err() != nil:
	case errors.Is(err, errBusy):
		k.throttled.Add(1)
	case errors.Is(err, errCut):
		k.cut.Add(1)
	default:
		k.failed.Add(1)
	}
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
