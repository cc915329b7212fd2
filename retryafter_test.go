package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/seed32e55400/retries"
)

// raResponse is a 429 response carrying Retry-After: v (none when v is "").
func raResponse(v string) *http.Response {
	h := http.Header{}
	if v != "" {
		h.Set("Retry-After", v)
	}
	return &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Status:     "429 Too Many Requests",
		Header:     h,
		Body:       io.NopCloser(strings.NewReader("slow down")),
	}
}

func TestWaitRetryAfter(t *testing.T) {
	const (
		fallback = 3 * time.Second
		limit    = 30 * time.Second
	)
	// Dates are relative to the time the test runs; in a synctest bubble
	// time.Now stays put (from 2000-01-01 00:00:00 UTC) until something
	// sleeps, so HTTP-dates give exact waits.
	date := func(d time.Duration) func() string {
		return func() string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	}
	fixed := func(v string) func() string { return func() string { return v } }
	resp := func(v func() string) func() retries.State {
		return func() retries.State { return retries.State{Value: raResponse(v())} }
	}
	for _, tc := range []struct {
		name  string
		state func() retries.State
		want  time.Duration
	}{
		{"seconds", resp(fixed("7")), 7 * time.Second},
		{"seconds with spaces", resp(fixed(" 7 ")), 7 * time.Second},
		{"zero", resp(fixed("0")), 0},
		{"HTTP-date", resp(date(12 * time.Second)), 12 * time.Second},
		{"obsolete RFC 850 date", resp(func() string { return time.Now().Add(5 * time.Second).UTC().Format(time.RFC850) }), 5 * time.Second},
		{"huge seconds are capped", resp(fixed("86400")), limit},
		{"seconds past int64 are capped", resp(fixed("99999999999999999999999")), limit},
		{"far date is capped", resp(date(100 * 365 * 24 * time.Hour)), limit},
		{"garbage falls back", resp(fixed("soon")), fallback},
		{"negative falls back", resp(fixed("-5")), fallback},
		{"fraction falls back", resp(fixed("1.5")), fallback},
		{"past date falls back", resp(date(-time.Minute)), fallback},
		{"no header falls back", resp(fixed("")), fallback},
		{"no response falls back", func() retries.State { return retries.State{Err: errors.New("boom")} }, fallback},
		{"nil response falls back", func() retries.State { return retries.State{Value: (*http.Response)(nil)} }, fallback},
		{"StatusError in the error", func() retries.State {
			return retries.State{Err: fmt.Errorf("visit: %w", &retries.StatusError{StatusCode: 503, Header: http.Header{"Retry-After": {"9"}}})}
		}, 9 * time.Second},
		{"RetryError of an inner Transport", func() retries.State {
			return retries.State{Err: &retries.RetryError{Attempts: 2, Value: raResponse("4")}}
		}, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := tc.state()
				st.Attempt = 1
				w := retries.WaitRetryAfter(retries.WaitFixed(fallback), limit)
				if got := w.Duration(st); got != tc.want {
					t.Errorf("Duration() = %v, want %v", got, tc.want)
				}
				if lo, hi := w.Bounds(st); lo != tc.want || hi != tc.want {
					t.Errorf("Bounds() = %v, %v, want %v, %v", lo, hi, tc.want, tc.want)
				}
			})
		})
	}
}

func TestWaitRetryAfterBoundsOfRandomFallback(t *testing.T) {
	w := retries.WaitRetryAfter(retries.WaitRandom(time.Second, 2*time.Second), time.Minute)
	if lo, hi := w.Bounds(retries.State{Attempt: 1, Value: raResponse("")}); lo != time.Second || hi != 2*time.Second {
		t.Errorf("Bounds() without header = %v, %v, want 1s, 2s", lo, hi)
	}
	if lo, hi := w.Bounds(retries.State{Attempt: 1, Value: raResponse("5")}); lo != 5*time.Second || hi != 5*time.Second {
		t.Errorf("Bounds() with Retry-After: 5 = %v, %v, want 5s, 5s", lo, hi)
	}
}

func TestWaitRetryAfterString(t *testing.T) {
	got := retries.WaitRetryAfter(retries.WaitFixed(time.Second), 30*time.Second).String()
	if want := "WaitRetryAfter(WaitFixed(1s), max=30s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestWaitRetryAfterPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "retries:") {
			t.Errorf("WaitRetryAfter(…, -1) panic = %v, want one starting with retries:", r)
		}
	}()
	retries.WaitRetryAfter(retries.WaitNone(), -1)
}

// TestWaitRetryAfterInPolicy runs a policy whose attempts return 429s with
// Retry-After: 5 and checks what it sleeps, and that the stop, the
// context's deadline and a BackOff's Stop still end the call.
func TestWaitRetryAfterInPolicy(t *testing.T) {
	stopAfterOne := func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Second), 1)
	}
	for _, tc := range []struct {
		name         string
		opts         []retries.Option
		ctxTimeout   time.Duration
		wantAttempts int
		wantSlept    time.Duration
		wantDeadline bool
	}{
		{name: "honoured", opts: []retries.Option{retries.WithStop(retries.StopAfterAttempt(3))}, wantAttempts: 3, wantSlept: 10 * time.Second},
		{name: "capped", opts: []retries.Option{retries.WithStop(retries.StopAfterAttempt(3)),
			retries.WithWait(retries.WaitRetryAfter(retries.WaitNone(), 2*time.Second))}, wantAttempts: 3, wantSlept: 4 * time.Second},
		{name: "the stop sees the wait", opts: []retries.Option{retries.WithStop(retries.StopBeforeDelay(4 * time.Second))}, wantAttempts: 1},
		{name: "the deadline sees the wait", ctxTimeout: 3 * time.Second, wantAttempts: 1, wantDeadline: true},
		{name: "a BackOff's Stop wins", opts: []retries.Option{retries.WithStop(retries.StopAfterAttempt(5)),
			retries.WithWait(retries.WaitRetryAfter(retries.WaitBackOff(stopAfterOne), time.Minute))}, wantAttempts: 2, wantSlept: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := retries.Throttle.Copy(retries.WithWait(retries.WaitRetryAfter(retries.Throttle.Wait(), 30*time.Second)))
				p = p.Copy(tc.opts...)
				ctx := context.Background()
				if tc.ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancel()
				}
				for call := 1; call <= 2; call++ { // the second call starts afresh
					start := time.Now()
					attempts := 0
					_, err := retries.DoValue(ctx, p, func(context.Context) (*http.Response, error) {
						attempts++
						return raResponse("5"), nil
					})
					var re *retries.RetryError
					if !errors.As(err, &re) {
						t.Fatalf("call %d: DoValue() error = %v, want a *RetryError", call, err)
					}
					if attempts != tc.wantAttempts || re.Attempts != tc.wantAttempts {
						t.Errorf("call %d: %d attempts (RetryError says %d), want %d", call, attempts, re.Attempts, tc.wantAttempts)
					}
					if re.Slept != tc.wantSlept || time.Since(start) != tc.wantSlept {
						t.Errorf("call %d: slept %v (RetryError says %v), want %v", call, time.Since(start), re.Slept, tc.wantSlept)
					}
					if got := errors.Is(err, context.DeadlineExceeded); got != tc.wantDeadline {
						t.Errorf("call %d: errors.Is(%v, DeadlineExceeded) = %v, want %v", call, err, got, tc.wantDeadline)
					}
				}
			})
		})
	}
}

// TestWaitRetryAfterThroughTransport checks the header end to end, from a
// real server through a Transport, with a cap of a millisecond.
func TestWaitRetryAfterThroughTransport(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		want         time.Duration
	}{
		{"an hour is capped", "3600", time.Millisecond},
		{"a date an hour away is capped", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), time.Millisecond},
		{"garbage falls back", "later, please", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 1 {
					w.Header().Set("Retry-After", tc.header)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				fmt.Fprint(w, "ok")
			})
			var waits []time.Duration
			p := retries.Throttle.Copy(
				retries.WithWait(retries.WaitRetryAfter(retries.WaitNone(), time.Millisecond)),
				retries.WithBeforeSleep(func(_ context.Context, s retries.State) { waits = append(waits, s.Wait) }),
			)
			client := &http.Client{Transport: retries.NewTransport(tpNewTracker(t), p)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			if got := tpRead(t, resp); got != "ok" {
				t.Errorf("body = %q, want ok", got)
			}
			if len(waits) != 1 || waits[0] != tc.want {
				t.Errorf("waits = %v, want [%v]", waits, tc.want)
			}
		})
	}
}
