package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
)

// Error is an answer of the config server other than a success: its
// status, and the "error-code" and "message" of its body.
type Error struct {
	Status      int
	Code        string // "INVALID_APPLICATION_PACKAGE", "ACTIVATION_CONFLICT", …; empty when the body gave none
	Message     string
	Method, URL string // the request's; URL with its password redacted
}

// Error says the request, the status, the code and the message.
func (e *Error) Error() string {
	s := fmt.Sprintf("control: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// retriedConflicts are the 409 codes with which the config server asks a
// client to try again: a conflict that passes.
var retriedConflicts = []string{
	"ACTIVATION_CONFLICT", "APPLICATION_LOCK_FAILURE", "PARENT_HOST_NOT_READY",
	"CERTIFICATE_NOT_READY", "LOAD_BALANCER_NOT_READY", "CONFIG_NOT_CONVERGED",
}

// Retryable reports whether a request that ended with err may be sent
// again, by the config server's error codes rather than by the class of
// its status: a connection that failed or an answer lost on the way, a
// 5xx, a 408, and a 409 whose code is one the config server means to be
// retried (ACTIVATION_CONFLICT, APPLICATION_LOCK_FAILURE,
// PARENT_HOST_NOT_READY, CERTIFICATE_NOT_READY, LOAD_BALANCER_NOT_READY,
// CONFIG_NOT_CONVERGED). Never a 400 (an invalid package, and the rest),
// 401, 403, 404, another 4xx, nor the end of the caller's context.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		return true // no answer: a connection refused, reset, cut
	}
	switch {
	case e.Status >= 500, e.Status == http.StatusRequestTimeout:
		return true
	case e.Status == http.StatusConflict:
		return slices.Contains(retriedConflicts, e.Code)
	}
	return false
}

// unsent reports whether err says a request was never sent: its
// connection could not be made.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// maxErrorBody bounds what is read of an error's body.
const maxErrorBody = 64 << 10

// readError returns the *Error of a response that is not a 2xx, read
// from its body ({"error-code": …, "message": …}), which it closes.
func readError(resp *http.Response) *Error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Method: resp.Request.Method, URL: resp.Request.URL.Redacted()}
	var body struct {
		Code    string `json:"error-code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.Message = body.Code, body.Message
	} else if len(b) > 0 {
		e.Message = string(b[:min(len(b), 512)])
	}
	return e
}
