package retries

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// StatusError reports an HTTP response with a 4xx or 5xx status, as returned
// by [CheckStatus]: the Go counterpart of the HTTPError that requests'
// raise_for_status raises, which [Visit] retries.
//
// Its message names the method, the URL with any password removed and the
// status, and never request headers or bodies.
type StatusError struct {
	// StatusCode is the response's status code, such as 503.
	StatusCode int
	// Status is the response's status line, such as "503 Service Unavailable".
	Status string
	// Method and URL identify the request; URL has its password redacted.
	Method, URL string
	// Header is the response's header, for fields such as Retry-After.
	Header http.Header
	// Body holds up to the first 4 KiB of the response body, which
	// CheckStatus has read and closed.
	Body []byte
}

// Error returns "retries: GET http://host/path: 503 Service Unavailable".
func (e *StatusError) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode)
	}
	switch {
	case e.Method == "" && e.URL == "":
		return "retries: HTTP status " + status
	case e.Method == "":
		return "retries: " + e.URL + ": " + status
	}
	return "retries: " + e.Method + " " + e.URL + ": " + status
}

// maxDrain bounds how much of a body is read before it is closed: enough to
// let net/http reuse the connection for small error bodies, small enough
// that a huge body is dropped instead of read.
const maxDrain = 4 << 10

// maxDiscardWait bounds how long reading a body that is about to be closed
// may take: a body that stalls is closed when it runs out, which unblocks a
// pending read in net/http (over HTTP/1 and HTTP/2), and then it is dropped.
// A small error body that has already arrived is read well within it, so
// its connection stays reusable.
const maxDiscardWait = 100 * time.Millisecond

// CheckStatus returns a [*StatusError] when resp has a 4xx or 5xx status, and
// nil otherwise (including for a nil resp). It is the analogue of
// raise_for_status. On error it reads up to 4 KiB of the body into
// StatusError.Body, drains up to 4 KiB more and closes the body, so the
// connection can be reused and nothing leaks when the error is retried; a
// body that stalls is given 100 ms in all, and StatusError.Body keeps what
// arrived by then. The caller must not read resp.Body after CheckStatus
// returns an error.
func CheckStatus(resp *http.Response) error {
	if resp == nil || resp.StatusCode < 400 || resp.StatusCode > 599 {
		return nil
	}
	return newStatusError(resp)
}

// newStatusError describes resp as a *StatusError, reading up to maxDrain
// bytes of its body into Body and closing the body.
func newStatusError(resp *http.Response) *StatusError {
	e := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	if req := resp.Request; req != nil {
		e.Method = req.Method
		if req.URL != nil {
			e.URL = req.URL.Redacted()
		}
	}
	if resp.Body != nil {
		var buf bytes.Buffer
		closeBody(resp.Body, &buf)
		e.Body = buf.Bytes()
	}
	return e
}

// discardBody drains up to maxDrain bytes of resp's body and closes it,
// within maxDiscardWait; it is the default discard step of a Policy.
func discardBody(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	closeBody(resp.Body, nil)
}

// abortBody is a body that knows a surer way to end a pending read than
// Close, and may ask for a shorter wait than maxDiscardWait: the body of a
// Transport's attempt, whose abort cancels the attempt's context and then
// closes the body, and whose attempt timeout bounds the wait.
type abortBody interface {
	io.ReadCloser
	abort()
	discardWait() time.Duration
}

// closeBody reads up to maxDrain bytes of body into keep (when keep is not
// nil), drains up to maxDrain more and closes body. If that takes longer
// than maxDiscardWait (or what the body asks for), body is closed, which
// ends a pending read, and what has not arrived is dropped.
func closeBody(body io.ReadCloser, keep *bytes.Buffer) {
	wait, giveUp := maxDiscardWait, body.Close
	if ab, ok := body.(abortBody); ok {
		wait = min(wait, ab.discardWait())
		giveUp = func() error { ab.abort(); return nil }
	}
	given := make(chan struct{})
	timer := time.AfterFunc(wait, func() {
		_ = giveUp() // closes body
		close(given)
	})
	if keep != nil {
		_, _ = keep.ReadFrom(io.LimitReader(body, maxDrain))
	}
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	if timer.Stop() {
		_ = body.Close()
		return
	}
	<-given // closed by the timer, maybe still closing: wait for it
}

// RetryIfStatus retries an outcome that carries one of codes as its HTTP
// status, read in this order:
//   - an error whose chain holds a [*StatusError] (found with errors.As);
//   - a value that is a non-nil [*http.Response];
//   - a non-nil value with a method StatusCode() int.
//
// Any other outcome, including a nil value and an error without a
// StatusError, is not retried. pyvespa's retry_if_status reads only
// returned values; reading StatusError as well lets the same predicate serve
// code that turns statuses into errors with [CheckStatus].
func RetryIfStatus(codes ...int) Predicate {
	return Predicate{&statusPred{codes: slices.Clone(codes)}}
}

type statusPred struct{ codes []int }

// statusCoder is a value that reports an HTTP status, like pyvespa's
// VespaResponse.get_status_code.
type statusCoder interface{ StatusCode() int }

func (p *statusPred) match(v any, err error) bool {
	code, ok := statusOf(v, err)
	return ok && slices.Contains(p.codes, code)
}

func (*statusPred) onValue() bool { return true }

func (p *statusPred) String() string {
	parts := make([]string, len(p.codes))
	for i, c := range p.codes {
		parts[i] = strconv.Itoa(c)
	}
	return "RetryIfStatus(" + strings.Join(parts, ", ") + ")"
}

// statusOf returns the HTTP status an outcome carries, if any.
func statusOf(v any, err error) (int, bool) {
	if err != nil {
		switch found := findInTree(err, isErrorAs[*StatusError]).(type) {
		case nil:
		case *StatusError:
			return found.StatusCode, true
		default: // its As method gives one
			var se *StatusError
			if found.(interface{ As(any) bool }).As(&se) && se != nil {
				return se.StatusCode, true
			}
		}
		return 0, false
	}
	switch r := v.(type) {
	case nil:
		return 0, false
	case *http.Response:
		if r == nil {
			return 0, false
		}
		return r.StatusCode, true
	case statusCoder:
		if isNil(v) {
			return 0, false
		}
		return r.StatusCode(), true
	}
	return 0, false
}
