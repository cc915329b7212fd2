package feed

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// refusedFirst is how many operations in a row, from the start of a feed
// and before any is acknowledged, the same refusal must answer for the
// feed to stop: a refusal of the client itself, which every later
// operation would meet too.
const refusedFirst = 20

// setupStop is the cause of the feed's end when its setup is wrong: a
// refusal that answered the first refusedFirst operations, or no response
// at all within Config.FirstResponse.
type setupStop struct{ msg string }

func (e *setupStop) Error() string { return e.msg }

// refusalOf returns what refusal of the client itself a response to op
// is, or "": a 401 or 403, a 404 to a put (a wrong -url; an update or
// remove may meet a missing document), or a 400 from a TLS layer in front
// of the server (nginx answers one to a missing or untrusted client
// certificate, or to plain HTTP on its HTTPS port).
func refusalOf(status int, kind Kind, body []byte) string {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return http.StatusText(status)
	case status == http.StatusNotFound && kind == Put:
		return "Not Found, to puts"
	case status == http.StatusBadRequest:
		b := strings.ToLower(string(body))
		if strings.Contains(b, "ssl certificate") || strings.Contains(b, "https port") || strings.Contains(b, "client certificate") {
			return "Bad Request from a TLS layer"
		}
	}
	return ""
}

// noteRefusal counts a response to op that was not an acknowledgement,
// and stops the feed when the same refusal of the client has answered
// each of the first refusedFirst operations.
func (c *Client) noteRefusal(op *operation, status int, msg string, body []byte) {
	if c.acked.Load() {
		return
	}
	what := refusalOf(status, op.kind, body)
	c.mu.Lock()
	if what != "" && what == c.refusal {
		c.refused++
	} else {
		c.refusal, c.refused = what, 1
	}
	n := c.refused
	c.mu.Unlock()
	if what == "" || n < refusedFirst || c.acked.Load() {
		return
	}
	c.stopSetup(fmt.Sprintf("the first %d operations were all refused with %d %s (%s), and every other would be: check -url, -header, -cert and -key",
		n, status, http.StatusText(status), msg))
}

// stopSetup ends the feed, its setup being wrong: no new request goes out,
// and those on the wire are answered.
func (c *Client) stopSetup(msg string) {
	e := &setupStop{msg: msg}
	if c.setupErr.CompareAndSwap(nil, e) {
		c.out.printf("retries feed: stopping: %s\n", msg)
		c.running.Load().halt(e)
	}
}

// watchFirstResponse stops the feed if no request has had a response
// Config.FirstResponse after the first went out: a wrong host or port, or
// a server that never answers. (A feed waiting for its input sends
// nothing, and is not stopped.) It returns the function that ends the
// watch.
func (c *Client) watchFirstResponse() func() {
	if c.cfg.FirstResponse <= 0 {
		return func() {}
	}
	var mu sync.Mutex
	var t *time.Timer
	ended := false
	c.wire.onFirst = func() {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		t = time.AfterFunc(c.cfg.FirstResponse, func() {
			if c.wire.responses.Load() == 0 {
				c.stopSetup(fmt.Sprintf("no request got a response in %v (%s): check -url", c.cfg.FirstResponse, c.wire.failure()))
			}
		})
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if t != nil {
			t.Stop()
		}
	}
}
