package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// spend makes n calls under p that each fail once with errBoom and then
// succeed, and returns how many attempts they made in all.
func spend(t *testing.T, p retries.Policy, n int) (attempts int) {
	t.Helper()
	for range n {
		failed := false
		_ = p.Do(t.Context(), func(context.Context) error {
			attempts++
			if !failed {
				failed = true
				return errBoom
			}
			return nil
		})
	}
	return attempts
}

func TestBudgetWindowForgetsOldDeposits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0.5, 0)
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithBudget(b))
		// 100 first attempts that succeed deposit room for 50 retries.
		for range 100 {
			if err := p.Do(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if s := b.Stats(); s.Deposits != 100 || s.Available != 50 {
			t.Fatalf("after 100 successes: %+v, want 100 deposits, 50 available", s)
		}
		time.Sleep(5 * time.Second)
		if s := b.Stats(); s.Available != 50 {
			t.Fatalf("5 s later: %+v, want the deposits still in the window", s)
		}
		time.Sleep(5 * time.Second)
		if s := b.Stats(); s.Deposits != 0 || s.Available != 0 {
			t.Fatalf("10 s later: %+v, want the deposits forgotten", s)
		}
		// A call that fails now deposits 0.5 of a retry: not enough.
		err := p.Do(t.Context(), func(context.Context) error { return errBoom })
		if !errors.Is(err, retries.ErrBudgetExhausted) || !errors.Is(err, errBoom) {
			t.Fatalf("Do() = %v, want a refusal that wraps boom", err)
		}
	})
}

func TestBudgetMinimumLetsATrickleThrough(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0, 2) // no share, but 2 retries/s: 20 per 10 s
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithBudget(b))
		if got := spend(t, p, 30); got != 30+20 {
			t.Errorf("30 calls made %d attempts, want 50 (20 retries allowed in 10 s)", got)
		}
		if s := b.Stats(); s.Retries != 20 || s.Refusals != 10 {
			t.Errorf("Stats() = %+v, want 20 retries and 10 refusals", s)
		}
		time.Sleep(10 * time.Second)
		if got := spend(t, p, 5); got != 10 {
			t.Errorf("10 s later, 5 calls made %d attempts, want 10", got)
		}
	})
}

func TestBudgetOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// 2000 calls over 20 s against a server that is down: DocV1 alone
		// would make 3 attempts each.
		b := retries.NewBudget(0.1, 1)
		p := retries.DocV1.Copy(retries.WithBudget(b))
		var attempts atomic.Int64
		var wg sync.WaitGroup
		for i := range 2000 {
			time.Sleep(10 * time.Millisecond)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := p.Do(t.Context(), func(context.Context) error {
					attempts.Add(1)
					return fmt.Errorf("call %d: %w", i, syscall.ECONNREFUSED)
				})
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("Do() = %v, want the last error itself (DocV1's rule)", err)
				}
			}()
		}
		wg.Wait()
		perCall := float64(attempts.Load()) / 2000
		// Retries are at most 10 % of first attempts plus 1/s in any 10 s.
		if perCall < 1.05 || perCall > 1.1+20.0/2000 {
			t.Errorf("%.3f attempts per call, want about 1.1", perCall)
		}
	})
}

func TestBudgetHealthyServiceIsNeverRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0.1, 0)
		p := retries.DocV1.Copy(retries.WithBudget(b))
		calls := 0
		for range 5000 {
			time.Sleep(5 * time.Millisecond) // 200 calls/s
			failed := false
			err := p.Do(t.Context(), func(context.Context) error {
				calls++
				if calls%33 == 0 && !failed { // 3 % of first attempts fail once
					failed = true
					return errBoom
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Do() = %v, want success", err)
			}
		}
		if s := b.Stats(); s.Refusals != 0 || s.Retries == 0 {
			t.Errorf("Stats() = %+v, want retries and no refusal", s)
		}
	})
}

// TestBudgetRefusalShapes checks what each of the seven policies returns
// when its budget refuses the first retry: its own exhaustion rule.
func TestBudgetRefusalShapes(t *testing.T) {
	t.Parallel()
	connErr := &net503{}
	for _, tc := range []struct {
		name   string
		policy retries.Policy
		// outcome is the first attempt's outcome: a status or an error.
		status int
		err    error
		// check examines what came back.
		check func(t *testing.T, resp *http.Response, err error)
	}{
		{"DocV1 with a 503", retries.DocV1, 503, nil, func(t *testing.T, resp *http.Response, err error) {
			if err != nil || resp == nil || resp.StatusCode != 503 {
				t.Errorf("got %v, %v; want the 503 response and no error", resp, err)
			}
		}},
		{"DocV1 with an error", retries.DocV1, 0, errBoom, lastErrorItself},
		{"SyncRequest with a 429", retries.SyncRequest, 429, nil, func(t *testing.T, resp *http.Response, err error) {
			if err != nil || resp == nil || resp.StatusCode != 429 {
				t.Errorf("got %v, %v; want the 429 response and no error", resp, err)
			}
		}},
		{"SyncRequest with a connection error", retries.SyncRequest, 0, connErr, func(t *testing.T, resp *http.Response, err error) {
			if err != error(connErr) {
				t.Errorf("got %v, want the connection error itself", err)
			}
		}},
		{"ControlPlane", retries.ControlPlane, 0, errBoom, lastErrorItself},
		{"URLValidation", retries.URLValidation, 0, errBoom, lastErrorItself},
		{"Query", retries.Query, 0, errBoom, refusalWrapping(errBoom)},
		{"Visit", retries.Visit, 0, &retries.StatusError{StatusCode: 503}, refusalWrapping(nil)},
		{"Throttle", retries.Throttle, 429, nil, func(t *testing.T, resp *http.Response, err error) {
			var re *retries.RetryError
			if !errors.As(err, &re) || !errors.Is(err, retries.ErrBudgetExhausted) || re.Attempts != 1 {
				t.Fatalf("got %v, want a *RetryError after 1 attempt that matches ErrBudgetExhausted", err)
			}
			if r, ok := re.Value.(*http.Response); !ok || r.StatusCode != 429 {
				t.Errorf("RetryError.Value = %v, want the 429 response", re.Value)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p := tc.policy.Copy(retries.WithBudget(retries.NewBudget(0, 0)))
				calls := 0
				resp, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
					calls++
					if tc.err != nil {
						return nil, tc.err
					}
					r, _ := response(tc.status, "busy")
					return r, nil
				})
				if calls != 1 {
					t.Errorf("%d calls, want 1: the budget refuses every retry", calls)
				}
				tc.check(t, resp, err)
			})
		})
	}
}

type net503 struct{}

func (*net503) Error() string   { return "connection refused" }
func (*net503) Unwrap() error   { return syscall.ECONNREFUSED }
func (*net503) Timeout() bool   { return false }
func (*net503) Temporary() bool { return false }

func lastErrorItself(t *testing.T, _ *http.Response, err error) {
	t.Helper()
	if err != errBoom {
		t.Errorf("got %v, want the last error itself", err)
	}
}

func refusalWrapping(last error) func(t *testing.T, _ *http.Response, err error) {
	return func(t *testing.T, _ *http.Response, err error) {
		t.Helper()
		var re *retries.RetryError
		if !errors.As(err, &re) || !errors.Is(err, retries.ErrBudgetExhausted) || re.Refusal != retries.ErrBudgetExhausted {
			t.Fatalf("got %v, want a *RetryError that matches ErrBudgetExhausted", err)
		}
		if last != nil && !errors.Is(err, last) {
			t.Errorf("got %v, want it to match the last error %v too", err, last)
		}
		if !strings.Contains(err.Error(), "retry budget exhausted after 1 attempt") {
			t.Errorf("message %q does not say the budget ended the call", err)
		}
	}
}

func TestBudgetExhaustionCallbackSeesRefusal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var refusals []error
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(3)),
			retries.WithOnExhausted(func(s retries.State) error { refusals = append(refusals, s.Refusal); return s.Err }))
		always := func(context.Context) error { return errBoom }
		_ = p.Do(t.Context(), always)                                                   // out of attempts
		_ = p.Copy(retries.WithBudget(retries.NewBudget(0, 0))).Do(t.Context(), always) // refused
		if len(refusals) != 2 || refusals[0] != nil || refusals[1] != retries.ErrBudgetExhausted {
			t.Errorf("State.Refusal = %v, want [nil ErrBudgetExhausted]", refusals)
		}
	})
}

func TestBudgetNotSpentOnWaitsOrEndedCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0, 10)
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(5)),
			retries.WithWait(retries.WaitFixed(time.Second)), retries.WithBudget(b))
		ctx, cancel := context.WithCancel(t.Context())
		err := p.Do(ctx, func(context.Context) error {
			if s := b.Stats(); s.Retries == 1 {
				go func() { time.Sleep(500 * time.Millisecond); cancel() }()
			}
			return errBoom
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do() = %v, want canceled", err)
		}
		// Attempt 1, a wait, retry 1 (cancel scheduled), half a wait: one
		// retry spent, none for the wait the context ended.
		if s := b.Stats(); s.Retries != 1 || s.Deposits != 1 {
			t.Errorf("Stats() = %+v, want 1 deposit and 1 retry", s)
		}
	})
}

func TestBudgetRefusesBeforeSleeping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := retries.DocV1.Copy(retries.WithBudget(retries.NewBudget(0, 0)))
		start := time.Now()
		_ = p.Do(t.Context(), func(context.Context) error { return errBoom })
		if d := time.Since(start); d != 0 {
			t.Errorf("a refused call took %v, want no wait at all", d)
		}
	})
}

func TestBudgetSharedByCopiesAndRemovedWithNil(t *testing.T) {
	t.Parallel()
	b := retries.NewBudget(0, 0)
	p := retries.ControlPlane.Copy(retries.WithWait(retries.WaitNone()), retries.WithBudget(b))
	q := p.Copy(retries.WithStop(retries.StopAfterAttempt(2)))
	_ = p.Do(t.Context(), func(context.Context) error { return errBoom })
	_ = q.Do(t.Context(), func(context.Context) error { return errBoom })
	if s := b.Stats(); s.Deposits != 2 || s.Refusals != 2 {
		t.Errorf("Stats() = %+v, want both copies to deposit and be refused", s)
	}
	calls := 0
	_ = q.Copy(retries.WithBudget(nil)).Do(t.Context(), func(context.Context) error { calls++; return errBoom })
	if calls != 2 {
		t.Errorf("without the budget: %d calls, want 2", calls)
	}
	if got := p.String(); !strings.HasSuffix(got, ", budget: NewBudget(0, 0)}") {
		t.Errorf("String() = %q, want it to name the budget", got)
	}
	for name, pol := range map[string]retries.Policy{"Query": retries.Query, "DocV1": retries.DocV1,
		"Throttle": retries.Throttle, "SyncRequest": retries.SyncRequest, "Visit": retries.Visit,
		"ControlPlane": retries.ControlPlane, "URLValidation": retries.URLValidation} {
		if s := pol.String(); strings.Contains(s, "budget") || strings.Contains(s, "limiter") {
			t.Errorf("%s carries a budget or a limiter: %v", name, s)
		}
	}
}

func TestBudgetConcurrentUse(t *testing.T) {
	t.Parallel()
	b := retries.NewBudget(0.2, 10)
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithBudget(b))
	var wg sync.WaitGroup
	var attempts, calls atomic.Int64
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				calls.Add(1)
				n := 0
				_ = p.Do(t.Context(), func(context.Context) error {
					attempts.Add(1)
					if n++; n == 1 && (g+i)%2 == 0 {
						return errBoom
					}
					return nil
				})
				if i%50 == 0 {
					_ = b.String()
				}
			}
		})
	}
	wg.Wait()
	s := b.Stats()
	retried := attempts.Load() - calls.Load()
	if s.Deposits != calls.Load() || s.Retries != retried {
		t.Errorf("Stats() = %+v, want %d deposits and %d retries", s, calls.Load(), retried)
	}
	if max := int64(0.2*float64(s.Deposits)) + 100; s.Retries > max {
		t.Errorf("%d retries granted, want at most %d", s.Retries, max)
	}
}

func TestNewBudgetPanics(t *testing.T) {
	t.Parallel()
	for _, args := range [][2]float64{{-0.1, 0}, {0, -1}, {math.NaN(), 0}, {0, math.NaN()}, {math.Inf(1), 0}} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.HasPrefix(msg, "retries: NewBudget") {
					t.Errorf("NewBudget(%v, %v) panicked with %v, want a retries: message", args[0], args[1], r)
				}
			}()
			retries.NewBudget(args[0], args[1])
		}()
	}
}

func TestBudgetString(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0.2, 10)
		spend(t, retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithBudget(b)), 3)
		want := "Budget(ratio=0.2, min=10/s; in 10s: 3 first attempts, 3 retries, 0 refused)"
		if got := b.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
}

// TestBudgetThroughTransport runs DocV1 with a budget through a Transport
// against a real server that is down (503) for its first 300 requests and
// then recovers, and counts what the server saw.
func TestBudgetThroughTransport(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= 300 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	b := retries.NewBudget(0.1, 0)
	p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithBudget(b))
	client := &http.Client{Transport: retries.NewTransport(nil, p)}
	ok, unavailable := 0, 0
	for range 500 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			unavailable++
		}
	}
	// Without the budget the 503s would cost 3 requests per call, 900 in
	// all for the first 300 calls. With it, at most 10 % more requests than
	// calls go out while the server is down.
	if n := seen.Load(); n > 500+50 {
		t.Errorf("the server saw %d requests for 500 calls, want at most 550", n)
	}
	if ok < 500-300 || ok+unavailable != 500 {
		t.Errorf("%d ok and %d unavailable, want every call answered and the last ones ok", ok, unavailable)
	}
	if s := b.Stats(); s.Refusals == 0 {
		t.Errorf("Stats() = %+v, want refusals during the outage", s)
	}
}

// BenchmarkBudget compares calls with and without a Budget: a first-try
// success (a deposit) and a call that fails once (a deposit and a granted
// retry), from one goroutine and from 64 sharing one Budget. The budget's
// room (a large ratio) grants every retry, so both sides do the same work.
func BenchmarkBudget(b *testing.B) {
	base := retries.New(retries.WithStop(retries.StopAfterAttempt(2)))
	for _, bc := range []struct {
		name      string
		succeedOn int
	}{{"first_try", 1}, {"one_retry", 2}} {
		for _, impl := range []string{"none", "budget"} {
			p := base
			if impl == "budget" {
				p = base.Copy(retries.WithBudget(retries.NewBudget(2, 1000)))
			}
			b.Run(bc.name+"/goroutines=1/impl="+impl, func(b *testing.B) { benchDo(b, p, bc.succeedOn) })
			b.Run(bc.name+"/goroutines=64/impl="+impl, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						o := op{succeedOn: bc.succeedOn}
						if err := p.Do(ctx, func(context.Context) error { return o.call() }); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// TestBudgetSliceEdges checks the window to the slice: first attempts made
// in the slice from 9.6 s to 9.8 s are in the window until 19.6 s and gone
// from then on, whether the budget was left alone in between or asked for
// its Stats every 100 ms.
func TestBudgetSliceEdges(t *testing.T) {
	t.Parallel()
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := retries.NewBudget(1, 0)
				ok := retries.New(retries.WithBudget(b))
				succeed := func(context.Context) error { return nil }
				time.Sleep(9700 * time.Millisecond)
				for range 100 {
					_ = ok.Do(t.Context(), succeed)
				}
				for now := 9700 * time.Millisecond; now < 19500*time.Millisecond; now += 100 * time.Millisecond {
					if busy {
						_ = b.Stats()
					}
					time.Sleep(100 * time.Millisecond)
				}
				if s := b.Stats(); s.Deposits != 100 || s.Available != 100 {
					t.Errorf("at 19.5 s: %+v, want the 100 first attempts of 9.7 s in the window", s)
				}
				time.Sleep(100 * time.Millisecond)
				if s := b.Stats(); s.Deposits != 0 || s.Available != 0 {
					t.Errorf("at 19.6 s: %+v, want them gone", s)
				}
			})
		})
	}
}

// TestBudgetConcurrentGrantsNeverExceedRoom lets 64 goroutines, released
// at once, each fail once against a budget with room for 10 retries: it
// grants exactly 10.
func TestBudgetConcurrentGrantsNeverExceedRoom(t *testing.T) {
	t.Parallel()
	for range 20 {
		b := retries.NewBudget(0, 1) // 10 retries in any 10 s
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithBudget(b))
		var wg sync.WaitGroup
		var retried atomic.Int64
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				n := 0
				_ = p.Do(context.Background(), func(context.Context) error {
					if n++; n == 1 {
						return errBoom
					}
					retried.Add(1)
					return nil
				})
			})
		}
		close(start)
		wg.Wait()
		if got, s := retried.Load(), b.Stats(); got != 10 || s.Retries != 10 || s.Refusals != 54 {
			t.Fatalf("%d retries ran, Stats() = %+v; want 10 granted and 54 refused", got, s)
		}
	}
}

// TestBudgetSpend: Spend, for hedges sent outside a policy, draws on the
// same room as the policy's retries: with NewBudget(0.5, 0), 10 first
// attempts (Deposit or a policy's) allow 5 Spends, and a refusal is
// counted.
func TestBudgetSpend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBudget(0.5, 0)
		p := retries.New(retries.WithBudget(b))
		for range 5 {
			b.Deposit()
			_ = p.Do(t.Context(), func(context.Context) error { return nil })
		}
		granted := 0
		for range 8 {
			if b.Spend() {
				granted++
			}
		}
		if s := b.Stats(); granted != 5 || s.Retries != 5 || s.Refusals != 3 {
			t.Errorf("granted %d, %+v; want 5 granted of 10 first attempts, 3 refused", granted, s)
		}
	})
}
