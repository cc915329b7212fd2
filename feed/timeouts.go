package feed

import (
	"sync"
	"time"
)

// expirer is what a deadline ends: an operation (Config.Timeout) or a
// request on the wire (Config.AttemptTimeout).
type expirer interface{ expire(cause error) }

// deadline is one place in a timeouts queue.
type deadline struct {
	start      time.Time
	base       time.Duration // the queue's held time at start
	owner      expirer
	prev, next *deadline
	queued     bool
}

// timeouts ends each tracked owner with cause once it has been tracked for
// timeout, not counting the time the queue is held (the feed's pauses,
// for Config.Timeout), unless it is untracked first. Every owner has the
// same timeout, so their deadlines come in the order they were tracked (a
// hold moves a later deadline at least as far as an earlier one): one
// queue, in that order, and one timer, set for its first, serve all of
// them, where a timer each would cost an AfterFunc and its allocations per
// operation. A timer that runs out while the queue is held is looked at
// again when it is released.
type timeouts struct {
	timeout time.Duration
	cause   error

	mu          sync.Mutex
	first, last *deadline
	timer       *time.Timer
	held        bool
	since       time.Time     // the start of the current hold
	total       time.Duration // held so far, the current hold excluded
}

// clock returns the time held so far at now. q.mu is held.
func (q *timeouts) clock(now time.Time) time.Duration {
	if q.held {
		return q.total + now.Sub(q.since)
	}
	return q.total
}

// track starts d's timeout, for owner.
func (q *timeouts) track(d *deadline, owner expirer) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	*d = deadline{start: now, base: q.clock(now), owner: owner, prev: q.last, queued: true}
	if q.last != nil {
		q.last.next = d
	} else {
		q.first = d
	}
	q.last = d
	switch {
	case q.timer == nil:
		q.timer = time.AfterFunc(q.timeout, q.expire)
	case d == q.first && !q.held:
		q.timer.Reset(q.timeout)
	}
}

// untrack ends d's timeout, if it has not run out.
func (q *timeouts) untrack(d *deadline) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unlink(d)
}

// unlink takes d out of the queue. q.mu is held.
func (q *timeouts) unlink(d *deadline) {
	if !d.queued {
		return
	}
	if d.prev != nil {
		d.prev.next = d.next
	} else {
		q.first = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else {
		q.last = d.prev
	}
	d.prev, d.next, d.queued = nil, nil, false
}

// hold stops the clock at now: the time until release does not count.
func (q *timeouts) hold(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.held {
		q.held, q.since = true, now
	}
}

// release starts the clock again at now, and ends what ran out meanwhile.
func (q *timeouts) release(now time.Time) {
	q.mu.Lock()
	if !q.held {
		q.mu.Unlock()
		return
	}
	q.held, q.total = false, q.total+now.Sub(q.since)
	q.endDue(now) // unlocks
}

// expire runs when the timer runs out.
func (q *timeouts) expire() {
	q.mu.Lock()
	if q.held { // release looks again
		q.mu.Unlock()
		return
	}
	q.endDue(time.Now()) // unlocks
}

// endDue takes out the owners at the head of the queue whose timeout has
// run out at now, sets the timer for the first one left, unlocks q.mu, and
// ends them, with no lock held.
func (q *timeouts) endDue(now time.Time) {
	var due []expirer
	for d := q.first; d != nil; d = q.first {
		ran := now.Sub(d.start) - (q.total - d.base)
		if ran < q.timeout {
			q.timer.Reset(q.timeout - ran)
			break
		}
		q.unlink(d)
		due = append(due, d.owner)
	}
	q.mu.Unlock()
	for _, o := range due {
		o.expire(q.cause)
	}
}
