package visit

import (
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/seed32e55400/retries"
)

// health is whether a Client's requests fail: from the first failure
// after a success (or the start) to the next request that reads something
// new. Failures that last logQuiet are logged, once, so that an operator
// hears soon of an endpoint that cannot be reached, and when it answers
// again; a 503 that the next attempt gets past says nothing.
type health struct {
	log    io.Writer
	prefix string

	mu      sync.Mutex
	failing bool
	logged  bool // the failing was logged
	since   time.Time
	cause   string // the last failure's
}

// logQuiet is how long failures last before they are logged.
const logQuiet = 500 * time.Millisecond

// failed notes an attempt that failed with err (redacted): the first of a
// run of failures that has lasted logQuiet is logged with the time the
// visit waits, maxOutage.
func (h *health) failed(err error, maxOutage time.Duration) {
	cause := causeOf(err).Error()
	h.mu.Lock()
	h.cause = cause
	if !h.failing {
		h.failing, h.logged, h.since = true, false, time.Now()
	}
	tell := !h.logged && time.Since(h.since) >= logQuiet
	h.logged = h.logged || tell
	h.mu.Unlock()
	if !tell || h.log == nil {
		return
	}
	wait := "for ever (no -max-outage)"
	if maxOutage > 0 {
		wait = fmt.Sprintf("for up to %v (-max-outage)", maxOutage)
	}
	fmt.Fprintf(h.log, "%sfailing: %s; each slice asks again from where it stands, %s\n", h.prefix, cause, wait)
}

// ok notes a request that read something new.
func (h *health) ok() {
	h.mu.Lock()
	was, since := h.failing && h.logged, h.since
	h.failing = false
	h.mu.Unlock()
	if was && h.log != nil {
		fmt.Fprintf(h.log, "%sanswers again, after failing for %v\n", h.prefix, time.Since(since).Round(100*time.Millisecond))
	}
}

// state returns the cause of the failures and how long they have lasted,
// or "" and 0 while the requests succeed.
func (h *health) state() (string, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return "", 0
	}
	return h.cause, time.Since(h.since)
}

// causeOf returns what failed at the bottom of err: the error that the
// client's *url.Error and the retry layers' *retries.RetryError wrap (the
// request's URL and the attempts counted are the same for every failure,
// and said once they make a line of 300 characters).
func causeOf(err error) error {
	for range 8 {
		switch e := err.(type) {
		case *url.Error:
			if e.Err == nil {
				return err
			}
			err = e.Err
		case *retries.RetryError:
			if e.Err == nil {
				return err
			}
			err = e.Err
		case *shortError:
			err = e.err
		default:
			return err
		}
	}
	return err
}

// shortError is err, said as its cause (causeOf) but matching err with
// errors.Is and errors.As.
type shortError struct{ err error }

func (e *shortError) Error() string { return causeOf(e.err).Error() }
func (e *shortError) Unwrap() error { return e.err }
