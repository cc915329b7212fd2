package retries_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

var (
	errBoom  = errors.New("boom")
	errOther = errors.New("other")
)

// schedule is what one run of a policy did, seen from the function it ran:
// the fake time of each call, relative to the start of the run.
type schedule struct {
	calls []time.Duration
}

// sleeps returns the gaps between consecutive calls. Inside a synctest
// bubble the function takes no time, so the gaps are exactly the waits.
func (s schedule) sleeps() []time.Duration {
	var out []time.Duration
	for i := 1; i < len(s.calls); i++ {
		out = append(out, s.calls[i]-s.calls[i-1])
	}
	return out
}

// runValue runs DoValue under p with fn called as fn(i) for the 0-based call
// number i, and records when each call happened. It must run inside a
// synctest bubble.
func runValue[T any](t *testing.T, ctx context.Context, p retries.Policy, fn func(i int) (T, error)) (T, schedule, error) {
	t.Helper()
	var s schedule
	start := time.Now()
	v, err := retries.DoValue(ctx, p, func(context.Context) (T, error) {
		i := len(s.calls)
		s.calls = append(s.calls, time.Since(start))
		return fn(i)
	})
	return v, s, err
}

// runErr is runValue for Policy.Do.
func runErr(t *testing.T, ctx context.Context, p retries.Policy, fn func(i int) error) (schedule, error) {
	t.Helper()
	var s schedule
	start := time.Now()
	err := p.Do(ctx, func(context.Context) error {
		i := len(s.calls)
		s.calls = append(s.calls, time.Since(start))
		return fn(i)
	})
	return s, err
}

// trackedBody is a response body that records reads and closes.
type trackedBody struct {
	r      io.Reader
	closed atomic.Bool
	read   atomic.Int64
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}

// response returns an *http.Response with the given status and body text,
// and the body so that a test can see whether it was read or closed.
func response(code int, body string) (*http.Response, *trackedBody) {
	b := &trackedBody{r: strings.NewReader(body)}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: b, Header: http.Header{}}, b
}

// statusSeq returns a function for runValue that answers with the given
// statuses in order, then keeps answering the last one.
func statusSeq(codes ...int) func(i int) (*http.Response, error) {
	return func(i int) (*http.Response, error) {
		r, _ := response(codes[min(i, len(codes)-1)], "body")
		return r, nil
	}
}

// secs is shorthand for a duration of f seconds.
func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
