package feed

import "time"

// Stats are a Client's counts since New, its Feeds' and Sends' together,
// for metrics: operations by how they ended, requests by what became of
// them, and the time paused by outages. Every count only grows.
type Stats struct {
	// Acknowledged are the operations acknowledged: a 2xx, or a 412 or a
	// 404 to a remove, which ConditionNotMet and NotFound count.
	Acknowledged, ConditionNotMet, NotFound int64
	// Failed are the operations not acknowledged, of which Unknown were
	// not safe to repeat and may have been applied, and HeldBack were not
	// sent behind a failed operation on their document.
	Failed, Unknown, HeldBack int64
	Requests                  int64 // sent, retries included
	Retries                   int64 // requests beyond the first of each operation
	Throttled                 int64 // 429 responses
	Unavailable               int64 // 503 responses
	Exceptions                int64 // requests that got no response
	InFlight                  int64 // requests on the wire now
	// Pauses counts the outages that paused the client, Paused the time
	// paused in all (the pause on now included), PausedNow whether one is.
	Pauses    int64
	Paused    time.Duration
	PausedNow bool
}

// Stats returns the client's counts since New.
func (c *Client) Stats() Stats {
	k, w := &c.total, &c.wire
	pauses, paused, on := c.pause.stats()
	return Stats{
		Acknowledged: k.ok.Load(), ConditionNotMet: k.condFailed.Load(), NotFound: k.notFound.Load(),
		Failed: k.failed.Load(), Unknown: k.unknown.Load(), HeldBack: k.heldBack.Load(),
		Requests: w.requests.Load(), Retries: w.retries.Load(), Throttled: w.throttled.Load(),
		Unavailable: w.unavailable.Load(), Exceptions: w.exceptions.Load(), InFlight: w.inFlight.Load(),
		Pauses: pauses, Paused: paused, PausedNow: on,
	}
}
