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
// new. Its changes are logged, once each, so that an operator hears at
// once of an endpoint that cannot be reached, and when it answers again.
type health struct {
	log    io.Writer
	prefix string

	mu      sync.Mutex
	failing bool
	since   time.Time
	cause   string // the last failure's
}

// failed notes a request that failed with err (redacted): the first of a
// run of failures is logged with the time the visit waits, maxOutage.
func (h *health) failed(err error, maxOutage time.Duration) {
	cause := causeOf(err).Error()
	h.mu.Lock()
	h.cause = cause
	first := !h.failing
	if first {
		h.failing, h.since = true, time.Now()
	}
	h.mu.Unlock()
	if !first || h.log == nil {
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
	was, since := h.failing, h.since
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
