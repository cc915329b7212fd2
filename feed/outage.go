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

// maxRedials bounds the rounds of attempts an operation gets again after a
// round that ended with a connection refused (see redial).
const maxRedials = 16

// redial reports whether op, whose round of attempts ended with err, goes
// round again on an endpoint rather than being reported. A connection that
// could not be made sent nothing, so an operation so ended cannot have been
// applied by that attempt, and the cause is the endpoint, never the
// operation: a server restarting refuses connections for a while, and its
// breaker opens only after failures that span a second (see
// retries.Breaker), by which time a feed with one or two requests in
// flight has used up the attempts of a few operations. From the opening
// on, the breaker holds the next round until the server answers, and
// failed probes spend no attempts. At most maxRedials rounds, and not when
// the operation's own context ended, nor for an operation not safe to
// repeat whose earlier request may have been applied.
func (c *Client) redial(ctx context.Context, op *operation, st *opState, err error) bool {
	if !isDialError(err) || ctx.Err() != nil || st.unknown(op) || st.redials >= maxRedials {
		return false
	}
	st.redials++
	return true
}

// wordWait bounds how long an operation waits for its endpoint's word
// on a failure (see outlast).
const wordWait = time.Second

// witnesses is how many operations, each after a failure, must fill a
// feed's window for their failures to say that the endpoint is out (see
// outlast): the breaker's streak.
const witnesses = 5

// outlast reports whether op, whose round of attempts on e ended in a
// failure (v, err) that its retry rule would send again, goes round again
// because the failure was an outage of e rather than its own. A round can
// end before e's breaker has seen failures enough to open: the budget
// refuses retries once an outage begins, and attempts with no wait between
// them are spent in moments. So the operation waits for e's next word. If
// e's breaker opens (or is open now), the failure was the outage's: the
// operation goes round again, held by the breaker until the server
// answers. If e acknowledges an operation sent after the word was asked
// for (one sent before may have been answered as the outage began), e
// answers again: an outage too short to open the breaker is over, or the
// failure was the operation's own; the operation goes round once more, and
// if it fails again with e answering, that failure stands. It stands too
// if e says nothing for wordWait. When no other operation is on e now (each
// other one waits for the word too), the next one the feed sends brings
// it, if the window has room; if it is full, none can come and the failure
// stands at once: going round to bring the word would make documents that
// fail by themselves fail again and again, and could open the breaker on
// them. Unless the window is full of such operations, more than witnesses
// of them: then their failures are the word (an outage, by the breaker's
// own count), and they all go round again. A Send's failure stands at once
// when no other operation is on e. (Before a feed's operation alone on e
// waited when the window had room, the last of those in flight as an
// outage began failed in about one outage in 80.) Not when the
// operation's own context ended, nor when the feed is stopping, nor for an
// operation not safe to repeat whose earlier request may have been
// applied; at most maxRedials rounds, counted with redial's.
func (c *Client) outlast(ctx context.Context, e *endpoint, op *operation, st *opState, v any, err error) bool {
	if ctx.Err() != nil || st.unknown(op) || st.redials >= maxRedials || !retriedAgain(op, v, err) {
		return false
	}
	n := e.nextWord()
	if e.breaker.State() == retries.BreakerClosed {
		w := e.waiting.Add(1)
		defer e.waiting.Add(-1)
		if w >= e.ops.Load() { // no other operation on e now to bring its word
			switch full := c.queues.full(); {
			case st.run == nil:
				return false
			case full && w > witnesses:
				e.opened() // none can come: their failures are the word
			case full:
				return false
			}
			// The window has room: the next operation sent brings the word.
		}
		t := time.NewTimer(wordWait)
		defer t.Stop()
		select {
		case <-n.done:
			if !n.opened {
				if st.afterAck { // it failed again with the endpoint answering
					return false
				}
				st.afterAck = true
			}
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	st.redials++
	return true
}
