package feed

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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
func (r *run) noteRefusal(op *operation, status int, msg string, body []byte) {
	c := r.c
	if c.acked.Load() {
		return
	}
	what := refusalOf(status, op.kind, body)
	var n int
	for {
		last := r.refused.Load()
		next := &refusals{what: what, n: 1}
		if last != nil && what != "" && what == last.what {
			next.n = last.n + 1
		}
		if r.refused.CompareAndSwap(last, next) {
			n = next.n
			break
		}
	}
	if what == "" || n < refusedFirst || c.acked.Load() {
		return
	}
	r.stopSetup(fmt.Sprintf("the first %d operations were all refused with %d %s (%s), and every other would be: check -url, -header, -cert and -key",
		n, status, http.StatusText(status), msg))
}

// refusals is the refusal of the client that answered a run's last
// operations, from its start ("" for another answer), and how many in a
// row.
type refusals struct {
	what string
	n    int
}

// stopSetup ends the feed, its setup being wrong: no new request goes out,
// and those on the wire are answered.
func (r *run) stopSetup(msg string) {
	if r.stop(&setupStop{msg: msg}, false) {
		r.c.out.logf("stopping: %s\n", msg)
		r.c.event(slog.LevelError, "feed: stopping: wrong setup", slog.String("error", msg))
	}
}
