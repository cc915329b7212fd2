package retries_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// recorder is an Observer that writes down what it sees, one line per
// event, and checks that every event gets the context Start returned.
type recorder struct {
	t      *testing.T
	events []string
}

type recorderKey struct{}

func (r *recorder) observer() *retries.Observer {
	check := func(ctx context.Context, event string) {
		if ctx.Value(recorderKey{}) != r {
			r.t.Errorf("%s: the context is not the one Start returned", event)
		}
	}
	return &retries.Observer{
		Start: func(ctx context.Context, c retries.CallInfo) context.Context {
			r.events = append(r.events, "start "+c.Policy)
			return context.WithValue(ctx, recorderKey{}, r)
		},
		Attempt: func(ctx context.Context, a retries.AttemptInfo) {
			check(ctx, "Attempt")
			r.events = append(r.events, fmt.Sprintf("attempt %d+%d err=%v retry=%v", a.Attempt, a.OutageAttempts, a.Err != nil, a.Retry))
		},
		Wait: func(ctx context.Context, _ retries.CallInfo, s retries.State) {
			check(ctx, "Wait")
			r.events = append(r.events, fmt.Sprintf("wait %v", s.Wait))
		},
		Refuse: func(ctx context.Context, _ retries.CallInfo, reason error) {
			check(ctx, "Refuse")
			r.events = append(r.events, "refuse "+reason.Error())
		},
		Hold: func(ctx context.Context, _ retries.CallInfo, reason error, d time.Duration) {
			check(ctx, "Hold")
			r.events = append(r.events, fmt.Sprintf("hold %v %v", d, reason == retries.ErrBreakerOpen))
		},
		Done: func(ctx context.Context, d retries.CallDone) {
			check(ctx, "Done")
			r.events = append(r.events, fmt.Sprintf("done %s %s attempts=%d elapsed=%v err=%v", d.Policy, d.Outcome, d.Attempts, d.Elapsed, d.Err != nil))
		},
	}
}

func TestObserver(t *testing.T) {
	t.Parallel()
	failTwice := func() func(context.Context) error {
		n := 0
		return func(ctx context.Context) error {
			if ctx.Value(recorderKey{}) == nil {
				t.Error("fn did not get the context Start returned")
			}
			if n++; n <= 2 {
				return errBoom
			}
			return nil
		}
	}
	oneSecond := retries.WithWait(retries.WaitFixed(time.Second))
	for _, tc := range []struct {
		name   string
		policy func(o *retries.Observer) retries.Policy
		ctx    func(context.Context) (context.Context, context.CancelFunc)
		fn     func() func(context.Context) error
		want   []string
	}{
		{
			name: "retries_twice",
			policy: func(o *retries.Observer) retries.Policy {
				return retries.Query.Copy(oneSecond, retries.WithObserver(o))
			},
			fn: failTwice,
			want: []string{
				"start Query",
				"attempt 1+0 err=true retry=true", "wait 1s",
				"attempt 2+0 err=true retry=true", "wait 1s",
				"attempt 3+0 err=false retry=false",
				"done Query success attempts=3 elapsed=2s err=false",
			},
		},
		{
			name: "gives_up",
			policy: func(o *retries.Observer) retries.Policy {
				return retries.New(retries.WithName("mine"), retries.WithStop(retries.StopAfterAttempt(2)), oneSecond, retries.WithObserver(o))
			},
			fn: failTwice,
			want: []string{
				"start mine",
				"attempt 1+0 err=true retry=true", "wait 1s",
				"attempt 2+0 err=true retry=true",
				"done mine gave_up attempts=2 elapsed=1s err=true",
			},
		},
		{
			name: "budget_refuses",
			policy: func(o *retries.Observer) retries.Policy {
				return retries.Query.Copy(oneSecond, retries.WithBudget(retries.NewBudget(0, 0)), retries.WithObserver(o))
			},
			fn: failTwice,
			want: []string{
				"start Query",
				"attempt 1+0 err=true retry=true",
				"refuse " + retries.ErrBudgetExhausted.Error(),
				"done Query budget_refused attempts=1 elapsed=0s err=true",
			},
		},
		{
			name: "not_retried",
			policy: func(o *retries.Observer) retries.Policy {
				return retries.SyncRequest.Copy(retries.WithObserver(o))
			},
			fn: failTwice, // errBoom is not a connection error
			want: []string{
				"start SyncRequest",
				"attempt 1+0 err=true retry=false",
				"done SyncRequest failure attempts=1 elapsed=0s err=true",
			},
		},
		{
			name: "context_ends",
			policy: func(o *retries.Observer) retries.Policy {
				return retries.Query.Copy(oneSecond, retries.WithObserver(o))
			},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 1500*time.Millisecond)
			},
			fn: failTwice,
			want: []string{
				"start Query",
				"attempt 1+0 err=true retry=true", "wait 1s",
				"attempt 2+0 err=true retry=true",
				"done Query context_done attempts=2 elapsed=1s err=true",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{t: t}
				ctx, cancel := context.WithCancel(t.Context())
				if tc.ctx != nil {
					ctx, cancel = tc.ctx(t.Context())
				}
				defer cancel()
				_ = tc.policy(r.observer()).Do(ctx, tc.fn())
				if got, want := strings.Join(r.events, "\n"), strings.Join(tc.want, "\n"); got != want {
					t.Errorf("events:\n%s\nwant:\n%s", got, want)
				}
			})
		})
	}
}

// TestObserverBreakerRefuses checks the events of a call that an open
// breaker refuses at once.
func TestObserverBreakerRefuses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{FailFast: true})
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(1)), retries.WithBreaker(b))
		for range 5 { // five failures in a row open it
			_ = p.Do(t.Context(), func(context.Context) error { return errBoom })
		}
		if b.State() != retries.BreakerOpen {
			t.Fatalf("breaker %v, want open", b.State())
		}
		r := &recorder{t: t}
		err := p.Copy(retries.WithObserver(r.observer())).Do(t.Context(), func(context.Context) error { return nil })
		if !errors.Is(err, retries.ErrBreakerOpen) {
			t.Fatalf("Do() = %v, want ErrBreakerOpen", err)
		}
		want := "start \nrefuse " + retries.ErrBreakerOpen.Error() + "\ndone  breaker_open attempts=0 elapsed=0s err=true"
		if got := strings.Join(r.events, "\n"); got != want {
			t.Errorf("events:\n%s\nwant:\n%s", got, want)
		}
	})
}

// TestObserverBreakerHolds checks the events of a call that an open
// breaker holds until its first probe, 50 ms after it opened (at 0).
func TestObserverBreakerHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(1)), retries.WithBreaker(b))
		// Five failures open it. The fifth call's failure comes as it
		// opens, so it spends no attempt and waits for the first probe,
		// 50 ms on, until its context ends at 10 ms.
		for range 5 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			_ = p.Do(ctx, func(context.Context) error { return errBoom })
			cancel()
		}
		r := &recorder{t: t}
		if err := p.Copy(retries.WithObserver(r.observer())).Do(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		want := "start \nhold 40ms true\nattempt 1+0 err=false retry=false\ndone  success attempts=1 elapsed=40ms err=false"
		if got := strings.Join(r.events, "\n"); got != want {
			t.Errorf("events:\n%s\nwant:\n%s", got, want)
		}
	})
}

func TestPolicyNames(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]retries.Policy{
		"Query": retries.Query, "DocV1": retries.DocV1, "Throttle": retries.Throttle, "SyncRequest": retries.SyncRequest,
		"Visit": retries.Visit, "ControlPlane": retries.ControlPlane, "URLValidation": retries.URLValidation,
	} {
		if p.Name() != name {
			t.Errorf("%s.Name() = %q", name, p.Name())
		}
		if got := p.Copy(retries.WithWait(retries.WaitNone())).Name(); got != name {
			t.Errorf("a copy of %s is named %q, want the same name", name, got)
		}
	}
	renamed := retries.DocV1.Copy(retries.WithName("feed"), retries.WithObserver(&retries.Observer{}))
	if renamed.Name() != "feed" || retries.DocV1.Name() != "DocV1" {
		t.Errorf("renamed %q, DocV1 %q; want feed and DocV1 unchanged", renamed.Name(), retries.DocV1.Name())
	}
	if (retries.Policy{}).Name() != "" {
		t.Error("the zero Policy has a name")
	}
	if got := retries.OutcomeContextDone.String(); got != "context_done" {
		t.Errorf("OutcomeContextDone.String() = %q", got)
	}
}

// TestObserverThroughTransport checks that every attempt of a Transport
// whose policy has an observer runs under the context Start returns, the
// first one included (which is then a shallow copy of the request).
func TestObserverThroughTransport(t *testing.T) {
	t.Parallel()
	srv := tpServe(t, tpStatuses(503, 200))
	r := &recorder{t: t}
	var seen []any
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		seen = append(seen, req.Context().Value(recorderKey{}))
		return http.DefaultTransport.RoundTrip(req)
	})
	p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithObserver(r.observer()))
	req := tpPost(t, context.Background(), srv.URL, "doc")
	resp, err := retries.NewTransport(base, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	tpRead(t, resp)
	if len(seen) != 2 || seen[0] != r || seen[1] != r {
		t.Errorf("attempts saw %v, want both under Start's context", seen)
	}
	if resp.Request == req {
		t.Error("the caller's request was sent itself, want a copy carrying Start's context")
	}
	want := "start DocV1\nattempt 1+0 err=false retry=true\nwait 0s\nattempt 2+0 err=false retry=false"
	if got := strings.Join(r.events[:4], "\n"); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// TestObserverAttemptsDuringOutage: CallDone counts attempts as
// RetryError does: Attempts leaves out those that failed during an
// outage, which OutageAttempts counts. Before, CallDone.Attempts included
// them.
func TestObserverAttemptsDuringOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var done retries.CallDone
		obs := &retries.Observer{Done: func(_ context.Context, d retries.CallDone) { done = d }}
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(100)),
			retries.WithBreaker(b), retries.WithObserver(obs))
		calls := 0
		err := p.Do(t.Context(), func(context.Context) error {
			if calls++; calls <= 5 { // 5 in a row, with no success ever, open the breaker
				return errRefused
			}
			return nil
		})
		if err != nil || calls != 6 {
			t.Fatalf("Do() = %v after %d calls, want success after 6", err, calls)
		}
		if done.Attempts != 5 || done.OutageAttempts != 1 {
			t.Errorf("CallDone attempts %d, outage attempts %d; want 5 and 1 (the failure that opened the breaker)", done.Attempts, done.OutageAttempts)
		}
	})
}

// TestObserverTimesAndValue: an observer hears each attempt's own time and
// the time it queued for the limiter, and the value the call returns. In
// fake time: the first call holds the limiter's one permit for 3 s while a
// second queues; that one's attempt runs 1 s and returns 42.
func TestObserverTimesAndValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts []retries.AttemptInfo
		var done []retries.CallDone
		obs := &retries.Observer{
			Attempt: func(_ context.Context, a retries.AttemptInfo) { attempts = append(attempts, a) },
			Done:    func(_ context.Context, d retries.CallDone) { done = append(done, d) },
		}
		l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
		p := retries.New(retries.WithLimiter(l), retries.WithObserver(obs))
		permit, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(3 * time.Second)
			permit.Release(retries.SignalSuccess)
		}()
		v, err := retries.DoValue(t.Context(), p, func(context.Context) (int, error) {
			time.Sleep(time.Second)
			return 42, nil
		})
		if v != 42 || err != nil {
			t.Fatalf("DoValue() = %v, %v", v, err)
		}
		if len(attempts) != 1 || attempts[0].Queued != 3*time.Second || attempts[0].Elapsed != time.Second {
			t.Errorf("attempts %+v, want one that queued 3 s and ran 1 s", attempts)
		}
		if len(done) != 1 || done[0].Value != 42 || done[0].Elapsed != 4*time.Second {
			t.Errorf("done %+v, want the value 42 after 4 s", done)
		}
	})
}
