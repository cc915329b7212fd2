package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// errTimeout is the cause of an operation's end when Config.Timeout ran out.
var errTimeout = errors.New("timed out (-timeout)")

// stopCause is why the feed's reading ended: ErrInterrupted for the
// caller's context, or the cause the feed stopped with.
func stopCause(runCtx context.Context) error {
	c := context.Cause(runCtx)
	if errors.Is(c, context.Canceled) || errors.Is(c, context.DeadlineExceeded) {
		return ErrInterrupted
	}
	return c
}

// outageError is the cause of every operation's end when an outage lasted
// longer than Config.MaxOutage.
type outageError struct{ limit time.Duration }

// Unwrap makes the error match retries.ErrBreakerOpen.
func (e *outageError) Unwrap() error { return retries.ErrBreakerOpen }

func (e *outageError) Error() string {
	return fmt.Sprintf("the server has been out for longer than %v (-max-outage)", e.limit)
}

// pause is the feed's pause: it begins when the breaker opens and ends
// when it closes. While paused the feed reads no input and the breaker
// lets only probes through. Time spent paused does not count against an
// operation's Config.Timeout (Client.opTimeouts is held).
type pause struct {
	mu      sync.Mutex
	on      bool
	since   time.Time     // the start of the current pause
	total   time.Duration // over the pauses that ended
	count   int64
	resumed chan struct{} // closed when the current pause ends
	limit   *time.Timer   // ends the feed after Config.MaxOutage

	waiting atomic.Pointer[chan struct{}] // resumed while paused; nil otherwise, read without mu
}

// clock returns the time spent paused so far, the current pause included.
// p.mu is held.
func (p *pause) clock(now time.Time) time.Duration {
	if p.on {
		return p.total + now.Sub(p.since)
	}
	return p.total
}

// begin starts a pause at now, unless one is on; onLimit is called if it
// lasts maxOutage (> 0). It reports whether a pause began.
func (p *pause) begin(now time.Time, maxOutage time.Duration, onLimit func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		return false
	}
	p.on, p.since = true, now
	p.count++
	p.resumed = make(chan struct{})
	p.waiting.Store(&p.resumed)
	if maxOutage > 0 {
		p.limit = time.AfterFunc(maxOutage, onLimit)
	}
	return true
}

// end ends the pause at now, if one is on, and returns how long it lasted.
func (p *pause) end(now time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return 0, false
	}
	d := now.Sub(p.since)
	p.on, p.total = false, p.total+d
	p.stopLimit()
	close(p.resumed)
	p.waiting.Store(nil)
	return d, true
}

// disarm stops the MaxOutage timer of the current pause, if any.
func (p *pause) disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLimit()
}

// stopLimit stops the MaxOutage timer, if any. p.mu is held.
func (p *pause) stopLimit() {
	if p.limit != nil {
		p.limit.Stop()
		p.limit = nil
	}
}

// paused reports whether a pause is on.
func (p *pause) paused() bool { return p.waiting.Load() != nil }

// stats returns the pauses so far and the time spent paused.
func (p *pause) stats() (count int64, paused time.Duration, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.clock(time.Now()), p.on
}

// onBreaker is each endpoint's OnStateChange: the feed pauses while every
// endpoint's breaker is open, and resumes when one closes. With several
// endpoints, the operations waiting on one whose breaker opens move to the
// others.
func (c *Client) onBreaker(e *endpoint, from, to retries.BreakerState) {
	now := time.Now()
	multi := len(c.endpoints) > 1
	var open int64
	switch {
	case from == retries.BreakerClosed:
		open = c.openEndpoints.Add(1)
		if multi {
			c.out.logf("endpoint %s is failing (%s); its operations go to the others\n", e.redactedURL(), c.wire.failure())
		}
	case to == retries.BreakerClosed:
		open = c.openEndpoints.Add(-1)
		if multi {
			c.out.logf("endpoint %s answers again\n", e.redactedURL())
		}
	default:
		open = c.openEndpoints.Load()
	}
	if from == retries.BreakerClosed {
		e.opened()
	}
	if multi && to == retries.BreakerOpen {
		e.moveAway()
	}
	all := open == int64(len(c.endpoints))
	switch {
	case all && from == retries.BreakerClosed:
		if c.pause.begin(now, c.cfg.MaxOutage, c.outageTooLong) {
			c.opTimeouts.hold(now)
			limit := "until it answers"
			if c.cfg.MaxOutage > 0 {
				limit = fmt.Sprintf("for up to %v (-max-outage)", c.cfg.MaxOutage)
			}
			what := "the server is failing"
			if multi {
				what = "every endpoint is failing"
			}
			hint := ""
			if c.wire.responses.Load() == 0 {
				// Nothing ever answered: most likely a wrong address,
				// said now rather than at Config.FirstResponse.
				hint = "; no request has got a response yet: check the URL"
			}
			c.out.logf("paused: %s (%s)%s; sending only probes, %s\n", what, c.wire.failure(), hint, limit)
			c.event(slog.LevelInfo, "feed: paused: "+what, slog.String("failure", c.wire.failure()))
		}
	case !all && to == retries.BreakerClosed:
		if d, ok := c.pause.end(now); ok {
			c.opTimeouts.release(now)
			if c.running.Load() == nil { // the next outage of the Sends has its own MaxOutage
				c.outage.Store(nil)
			}
			c.out.logf("resumed: the server answers again, after a pause of %v\n", d.Round(100*time.Millisecond))
			c.event(slog.LevelInfo, "feed: resumed", slog.Duration("paused", d))
		}
	}
}

// outageTooLong ends the feed: the pause has lasted Config.MaxOutage.
// Every operation in flight ends at once, with an *outageError.
func (c *Client) outageTooLong() {
	err := &outageError{limit: c.cfg.MaxOutage}
	if c.outage.CompareAndSwap(nil, err) {
		c.out.logf("stopping: %v\n", err)
		c.event(slog.LevelError, "feed: stopping: outage too long", slog.Duration("maxoutage", c.cfg.MaxOutage))
		if r := c.running.Load(); r != nil {
			r.stop(err, true)
		}
		c.haltSends(err) // the Sends waiting out the outage too
	}
}
