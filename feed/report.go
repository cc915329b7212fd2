package feed

import (
	"errors"
	"time"

	"github.com/seed32e55400/retries"
)

// Report is what a Feed did: its counts, what it wrote, why it stopped
// early, and its limiter, budget and breaker; Summary gives it as the
// feed command's JSON.
type Report struct {
	operations    int64 // read from the input, bad ones included
	elements      int64 // what ops yielded, errors included
	ok            int64 // acknowledged
	failed        int64 // elements not acknowledged: failed, held back, not sent, bad input
	badInput      int64
	unsent        []*operation // dispatched but not sent when the feed stopped
	heldBack      int64        // not sent: an earlier operation on the document failed
	written       int64        // written to Config.Failed
	unknown       int64        // unsafe operations that failed with their outcome unknown
	unknownOut    int64        // of those, written to Config.Unknown
	unreadBytes   int64        // written to Config.Unread
	writeErr      error        // the first error writing to Config.Failed
	hasFailedFile bool         // Config.Failed is set
	stopped       error        // why the feed stopped early by itself (see run.stop), or nil
	endpoints     any          // each endpoint's counts, limiter and breaker, when there are several
	pauses        int64        // the times the feed paused
	paused        time.Duration
	unread        inputPos // line > 0: the input from here on was not read (interrupted, or broken JSON)
	lineless      bool     // the operations taken had no input line: an iterator's, not Read's
	resumable     bool     // Config.Resumable: what was not sent is left to the resumed feed
	notFound      int64    // removes answered 404
	condFailed    int64    // operations answered 412
	refusals      int64    // retries the budget refused
	inFlight      int64    // requests in flight at the end
	elapsed       time.Duration
	wire          *wireStats
	counts        Progress // the counts at the end

	Limiter *retries.Limiter // the feed's limiter; nil with a fixed concurrency
	Budget  *retries.Budget  // Config.Budget
	Breaker *retries.Breaker // the feed's breaker
}

// Stopped returns why the feed stopped by itself before the end of its
// input, or nil: a TLS error (see TLSError), a wrong setup (SetupError),
// or an outage longer than Config.MaxOutage (OutageExceeded). An
// interrupt (the context of Feed) is not one of them.
func (r Report) Stopped() error { return r.stopped }

// TLSError returns the TLS error that stopped the feed (a certificate
// refused either way, a server that does not speak TLS), or nil.
func (r Report) TLSError() error {
	var e *tlsStop
	if errors.As(r.stopped, &e) {
		return e.err
	}
	return nil
}

// OutageExceeded reports whether an outage outlasted Config.MaxOutage and
// ended the feed.
func (r Report) OutageExceeded() bool { return errors.As(r.stopped, new(*outageError)) }

// SetupError returns why the feed stopped for a wrong setup, or nil: the
// same refusal of the client (401, 403, a 404 to puts, a TLS layer's
// 400) answered its first operations, or no request had a response within
// Config.FirstResponse.
func (r Report) SetupError() error {
	var e *setupStop
	if errors.As(r.stopped, &e) {
		return e
	}
	return nil
}

// Complete reports whether every operation of the input was read, sent and
// acknowledged.
func (r Report) Complete() bool { return r.failed == 0 && r.unread.line == 0 }
