package feed

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// heldRT is a base RoundTripper that answers a request once answer is
// closed, or fails it when its context ends first; it keeps each
// request's context.
type heldRT struct {
	answer chan struct{}
	ctxs   chan context.Context
}

func (h heldRT) RoundTrip(req *http.Request) (*http.Response, error) {
	h.ctxs <- req.Context()
	select {
	case <-h.answer:
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// TestWireTimeouts: each request goes out under a context of its own, a
// child of the operation's wire context: Config.AttemptTimeout ends it
// (an error that matches retries.ErrAttemptTimeout and is a timeout, the
// request counted as maybe applied); an answer in time stops the clock,
// and the request's context lives until its body is closed; the
// operation's Config.Timeout ends the request on the wire too; a halted
// operation sends nothing; and a halt leaves a request on the wire alone.
func TestWireTimeouts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := heldRT{answer: make(chan struct{}), ctxs: make(chan context.Context, 8)}
		var stats wireStats
		attempts := &timeouts{timeout: time.Second, cause: errAttemptTimeout}
		wire := wireCounter{base: h, s: &stats, attempts: attempts}
		op := &operation{kind: Put, id: "id:ns:d::1", safe: true}
		request := func(st *opState) *http.Request {
			req, err := http.NewRequestWithContext(st, http.MethodPost, "http://127.0.0.1/document/v1/ns/d/docid/1", nil)
			if err != nil {
				t.Fatal(err)
			}
			return req
		}

		// No answer: the attempt ends after its timeout, the operation
		// goes on.
		st := newOpState(t.Context(), t.Context(), nil, op, nil)
		start := time.Now()
		_, err := wire.RoundTrip(request(st))
		var te interface{ Timeout() bool }
		if !errors.Is(err, retries.ErrAttemptTimeout) || !errors.As(err, &te) || !te.Timeout() || time.Since(start) != time.Second {
			t.Errorf("unanswered: %v after %v; want an attempt timeout after 1s", err, time.Since(start))
		}
		if st.Err() != nil || !st.maybeApplied.Load() || st.onWire.Load() != nil || stats.exceptions.Load() != 1 {
			t.Errorf("unanswered: operation's context %v, maybe applied %v, on the wire %v, exceptions %d; want alive, true, nothing, 1",
				st.Err(), st.maybeApplied.Load(), st.onWire.Load(), stats.exceptions.Load())
		}
		<-h.ctxs

		// An answer in time: no timeout later, and the request's context
		// ends when its body is closed.
		close(h.answer)
		resp, err := wire.RoundTrip(request(st))
		if err != nil {
			t.Fatal(err)
		}
		rctx := <-h.ctxs
		time.Sleep(5 * time.Second)
		if rctx.Err() != nil {
			t.Errorf("answered: the request's context ended before its body was closed: %v", context.Cause(rctx))
		}
		_ = resp.Body.Close()
		if rctx.Err() == nil || st.onWire.Load() != nil {
			t.Error("answered: the request's context lives on after its body was closed")
		}
		st.cancel(nil)

		// A halted operation sends nothing.
		halted := newOpState(t.Context(), t.Context(), nil, op, nil)
		halted.cancel(ErrInterrupted)
		if _, err := wire.RoundTrip(request(halted)); err != ErrInterrupted || len(h.ctxs) != 0 {
			t.Errorf("halted: %v, %d requests out; want ErrInterrupted and none", err, len(h.ctxs))
		}

		// The operation's timeout ends its request on the wire; a halt
		// does not.
		h.answer = make(chan struct{})
		wire.base = h
		timed := newOpState(t.Context(), t.Context(), nil, op, nil)
		go func() {
			<-h.ctxs
			timed.expire(errTimeout)
		}()
		if _, err := wire.RoundTrip(request(timed)); err == nil || context.Cause(timed) != errTimeout {
			t.Errorf("timed out: %v, the operation's cause %v; want an error and errTimeout", err, context.Cause(timed))
		}
		halted = newOpState(t.Context(), t.Context(), nil, op, nil)
		go func() {
			rctx := <-h.ctxs
			halted.cancel(ErrInterrupted)
			synctest.Wait()
			if rctx.Err() != nil {
				t.Error("a halt ended the request on the wire")
			}
			close(h.answer)
		}()
		resp, err = wire.RoundTrip(request(halted))
		if err != nil {
			t.Fatalf("halted with a request on the wire: %v, want its answer", err)
		}
		_ = resp.Body.Close()
	})
}
