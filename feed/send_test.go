package feed

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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
// A request is on its transport's load from its send until its body is
// closed, or its error.
func TestWireTimeouts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := heldRT{answer: make(chan struct{}), ctxs: make(chan context.Context, 8)}
		var stats wireStats
		attempts := &timeouts{timeout: time.Second, cause: errAttemptTimeout}
		pool := &connPool{ts: []http.RoundTripper{h}, load: make([]atomic.Int64, 1), s: &stats}
		wire := opWire{pool: pool, attempts: attempts}
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
		if st.Err() != nil || !st.maybeApplied.Load() || st.onWire.Load() != nil || stats.exceptions.Load() != 1 || pool.load[0].Load() != 0 {
			t.Errorf("unanswered: operation's context %v, maybe applied %v, on the wire %v, exceptions %d, transport's load %d; want alive, true, nothing, 1, 0",
				st.Err(), st.maybeApplied.Load(), st.onWire.Load(), stats.exceptions.Load(), pool.load[0].Load())
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
		if rctx.Err() != nil || pool.load[0].Load() != 1 {
			t.Errorf("answered: before its body was closed, the request's context ended (%v), or its transport's load is %d, not 1", context.Cause(rctx), pool.load[0].Load())
		}
		_ = resp.Body.Close()
		if rctx.Err() == nil || st.onWire.Load() != nil || pool.load[0].Load() != 0 {
			t.Errorf("answered: after its body was closed, the request's context lives on (%v), or its transport's load is %d, not 0", rctx.Err() == nil, pool.load[0].Load())
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
		pool.ts[0] = h
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

// ended is an owner of a deadline that records when and why it ended.
type ended struct {
	start time.Time
	mu    sync.Mutex
	at    time.Duration
	cause error
	n     int
}

func (e *ended) expire(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at, e.cause = time.Since(e.start), cause
	e.n++
}

// get returns how many times e ended, and when and why it last did.
func (e *ended) get() (int, time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n, e.at, e.cause
}

var errTest = errors.New("test timeout")

// TestTimeoutsSkipHolds: a timeout counts the time the queue is not held
// (the feed not paused) only.
func TestTimeoutsSkipHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &timeouts{timeout: time.Second, cause: errTest}
		run := func(name string, want time.Duration, during func()) {
			t.Helper()
			var d deadline
			e := &ended{start: time.Now()}
			q.track(&d, e)
			during()
			time.Sleep(10 * time.Second)
			if n, at, cause := e.get(); n != 1 || cause != errTest || at != want {
				t.Errorf("%s: ended %d times, at %v with %v; want once at %v with errTest", name, n, at, cause, want)
			}
		}
		run("no hold", time.Second, func() {})
		run("held from 0.5 s to 3 s, while the timer runs out", 3500*time.Millisecond, func() {
			time.AfterFunc(500*time.Millisecond, func() { q.hold(time.Now()) })
			time.AfterFunc(3*time.Second, func() { q.release(time.Now()) })
		})
		run("held from 0.2 s to 0.4 s, before it runs out", 1200*time.Millisecond, func() {
			time.AfterFunc(200*time.Millisecond, func() { q.hold(time.Now()) })
			time.AfterFunc(400*time.Millisecond, func() { q.release(time.Now()) })
		})
		// Tracked 1.5 s into a hold that lasts 2 s: the hold counts from
		// the start only, so it ends 1.5 s after it started.
		q.hold(time.Now())
		time.Sleep(1500 * time.Millisecond)
		run("started during a hold", 1500*time.Millisecond, func() {
			time.AfterFunc(500*time.Millisecond, func() { q.release(time.Now()) })
		})
		// Untracked before its timeout: never ended.
		var d deadline
		e := &ended{start: time.Now()}
		q.track(&d, e)
		q.untrack(&d)
		time.Sleep(2 * time.Second)
		if n, _, cause := e.get(); n != 0 {
			t.Errorf("an untracked deadline ended with %v", cause)
		}
	})
}

// TestTimeoutsQueue: the deadlines share one queue and one timer: each
// ends its own timeout after its start, in the order they were tracked,
// whichever of them are untracked on the way, across a hold that moves the
// later deadlines by what is left of it after their start.
func TestTimeoutsQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &timeouts{timeout: time.Second, cause: errTest}
		start := time.Now()
		ds := make([]deadline, 6)
		es := make([]*ended, 6)
		for i := range ds {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			es[i] = &ended{start: start}
			q.track(&ds[i], es[i])
		}
		// Tracked at 0, 0.1, … 0.5 s. Untracked: the first at 0.5 s, the
		// fourth at 0.9 s (both before their timeout). Held from 1.15 s to
		// 1.45 s: the second (due at 1.1 s) is not touched by it, the
		// third (1.2 s) ends at 1.5 s, the fifth and sixth 0.3 s late.
		q.untrack(&ds[0])
		time.AfterFunc(400*time.Millisecond, func() { q.untrack(&ds[3]) })
		time.AfterFunc(650*time.Millisecond, func() { q.hold(time.Now()) })
		time.AfterFunc(950*time.Millisecond, func() { q.release(time.Now()) })
		time.Sleep(5 * time.Second)
		want := []time.Duration{0, 1100 * time.Millisecond, 1500 * time.Millisecond, 0, 1700 * time.Millisecond, 1800 * time.Millisecond}
		for i, e := range es {
			n := 1
			if want[i] == 0 {
				n = 0
			}
			if got, at, _ := e.get(); got != n || at != want[i] {
				t.Errorf("deadline %d ended %d times, at %v; want %d at %v", i, got, at, n, want[i])
			}
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.first != nil || q.last != nil {
			t.Error("the queue is not empty")
		}
	})
}
