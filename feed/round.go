package feed

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/seed32e55400/retries"
)

// This file decides what follows a round of attempts of an operation on an
// endpoint e that ended in a failure: the decisions are pure functions of
// what is known then, each a table; again gathers the facts and does what
// they say, on the sender's goroutine.
//
// Why an operation goes round again at all: its round can use up its
// attempts before e's breaker has seen failures enough to open (attempts
// with no wait between them are spent in moments, and the budget refuses
// retries once an outage begins), and a connection that could not be made
// cost the server nothing and cannot have applied anything; a server
// restarting refuses connections for a while.

// step is what follows a failed round.
type step int

const (
	stand  step = iota // the failure stands: it is reported
	move               // round again elsewhere: e's breaker opened during the stay, which moved the operation
	detour             // round again on another endpoint; e is marked as one that failed it
	redial             // round again on e: a connection could not be made
	hear               // hear e's next word, then decide (awaitWord)
)

// maxRedials bounds the rounds an operation goes again on one endpoint
// (redial and hear, counted together).
const maxRedials = 16

// roundEnd is what is known when a round of an operation ends in a failure.
type roundEnd struct {
	unknown   bool // not safe to repeat, and a request of it may have been applied
	ended     bool // the stay's context ended: the operation's own, or a move
	moved     bool // the stay ended by a move (e's breaker opened)
	retried   bool // its retry rule would send it again, and the feed is not stopping (retriedAgain)
	refused   bool // the budget refused a retry after an answer
	dial      bool // the round ended with a connection that could not be made
	multi     bool // the feed has other endpoints
	elsewhere bool // one of them, its breaker closed, has not failed the operation
	redials   int  // the rounds it went again on e
}

// next is the step after a failed round: the first row that holds.
//
//	row  when                                                      step
//	1    not safe to repeat and maybe applied                      stand
//	2    its own context ended (not a move)                        stand
//	3    moved, multi, retried                                     move
//	4    moved                                                     stand
//	5    multi, retried, elsewhere, not refused unless a dial      detour
//	6    a dial, redials < maxRedials                              redial
//	7    retried, redials < maxRedials                             hear
//	8    otherwise                                                 stand
//
// Row 5: at most one stay on each endpoint; a refusal of the budget after
// an answer stands, while one after a connection that could not be made
// does not count (it cost the server nothing).
func (r roundEnd) next() step {
	switch {
	case r.unknown, r.ended && !r.moved:
		return stand
	case r.moved && r.multi && r.retried:
		return move
	case r.moved:
		return stand
	case r.multi && r.retried && r.elsewhere && (!r.refused || r.dial):
		return detour
	case r.dial && r.redials < maxRedials:
		return redial
	case r.retried && r.redials < maxRedials:
		return hear
	}
	return stand
}

// wordPlan is what an operation that hears e's word does while e's
// breaker is closed.
type wordPlan int

const (
	standNow wordPlan = iota // the failure stands at once: no word can come
	wait                     // wait for the word
	witness                  // the failures waiting are the word: e is out (opened), then wait
)

// planWord decides how an operation hears e's word, its breaker closed:
//
//	row  when                                                    plan
//	1    other operations are on e (they bring the word)         wait
//	2    alone on e, a Send                                      standNow
//	3    alone, the feed's window full, > witnesses waiting      witness
//	4    alone, the window full                                  standNow
//	5    alone, the window has room (the next sent brings it)    wait
//
// Row 4: going round to bring the word would make documents that fail by
// themselves fail again and again, and could open the breaker on them.
// Row 3: unless the window is full of such operations, more than
// witnesses: their failures are the word (an outage, by the breaker's own
// count). (Before a feed's operation alone on e waited when the window had
// room, the last of those in flight as an outage began failed in about one
// outage in 80.)
func planWord(alone, send, full bool, waiting int64) wordPlan {
	switch {
	case !alone:
		return wait
	case send:
		return standNow
	case full && waiting > witnesses:
		return witness
	case full:
		return standNow
	}
	return wait
}

// heard decides what e's word says, with afterAck set when the operation
// already went round once after e answered: whether it goes round again,
// and afterAck after it.
//
//	row  word                          again   afterAck
//	1    e's breaker opened            yes     as it was
//	2    e acknowledged, first time    yes     set
//	3    e acknowledged, after one     no      -
//	4    none in wordWait, or ended    no      -
func heard(word, opened, afterAck bool) (again, after bool) {
	switch {
	case !word:
		return false, afterAck
	case opened:
		return true, afterAck
	case afterAck:
		return false, afterAck
	}
	return true, true
}

// wordWait bounds how long an operation waits for its endpoint's word
// on a failure.
const wordWait = time.Second

// witnesses is how many operations, each after a failure, must fill a
// feed's window for their failures to say that the endpoint is out: the
// breaker's streak.
const witnesses = 5

// again decides what follows a round of attempts of op on e that ended in
// a failure, its last response v (or nil) and err, and does it: true, the
// operation goes round again; false, the failure stands.
func (c *Client) again(ctx context.Context, e *endpoint, op *operation, st *opState, v any, err error) bool {
	r := roundEnd{
		unknown: st.unknown(op),
		ended:   ctx.Err() != nil,
		moved:   errors.Is(context.Cause(ctx), errMoved),
		retried: retriedAgain(op, v, err),
		refused: errors.As(err, new(*refusedAfter)),
		dial:    isDialError(err),
		multi:   e.multi,
		redials: st.redials,
	}
	if r.multi {
		r.elsewhere = slices.ContainsFunc(c.endpoints, func(o *endpoint) bool {
			return o != e && !slices.Contains(st.failedOn, o) && o.breaker.State() == retries.BreakerClosed
		})
	}
	switch r.next() {
	case move:
		return true
	case detour:
		st.failedOn = append(st.failedOn, e)
		return true
	case redial:
		st.redials++
		return true
	case hear:
		if c.awaitWord(ctx, e, st) {
			st.redials++
			return true
		}
	}
	return false
}

// awaitWord waits for e's next word on a failure of the operation whose
// state is st, and reports whether it goes round again: at once when e's
// breaker is open (the failure was an outage's: the breaker holds the next
// round until the server answers); else as planWord and heard decide.
// An operation acknowledged on e after the word was asked for is e's word
// that it answers (one sent before may have been answered as the outage
// began).
func (c *Client) awaitWord(ctx context.Context, e *endpoint, st *opState) bool {
	n := e.nextWord()
	if e.breaker.State() != retries.BreakerClosed {
		return true
	}
	w := e.waiting.Add(1)
	defer e.waiting.Add(-1)
	switch planWord(w >= e.ops.Load(), st.run == nil, c.queues.full(), w) {
	case standNow:
		return false
	case witness:
		e.opened() // none can come: their failures are the word
	}
	t := time.NewTimer(wordWait)
	defer t.Stop()
	word := false
	select {
	case <-n.done:
		word = true
	case <-t.C:
	case <-ctx.Done():
	}
	again, after := heard(word, word && n.opened, st.afterAck)
	st.afterAck = after
	return again
}
