package retries_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

var errDown = errors.New("connection refused (the server is down)")

// errRefused is a connection error, as net/http returns for a server
// that is not listening.
var errRefused error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// outageServer fails every attempt that starts in [from, to) after 1 ms,
// and succeeds after 1 ms otherwise. It counts the attempts that start in
// the outage and the most of them in flight at once.
type outageServer struct {
	from, to time.Time
	err      error // what a failed attempt returns; nil: errDown
	inOutage atomic.Int64
	inFlight atomic.Int64
	maxAfter atomic.Int64 // most attempts in flight at once that began after from+settle
	settle   time.Duration
}

func (s *outageServer) call(context.Context) error {
	now := time.Now()
	if now.Before(s.from) || !now.Before(s.to) {
		time.Sleep(time.Millisecond)
		return nil
	}
	s.inOutage.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	if !now.Before(s.from.Add(s.settle)) {
		for {
			m := s.maxAfter.Load()
			if n <= m || s.maxAfter.CompareAndSwap(m, n) {
				break
			}
		}
	}
	time.Sleep(time.Millisecond)
	if s.err != nil {
		return s.err
	}
	return errDown
}

// TestBreakerWaitsOutAnOutage: 32 goroutines call DocV1 with a breaker
// through an 8 s outage, far longer than DocV1's 3 attempts. No call fails,
// few attempts reach the server while it is down, one at a time once the
// breaker has opened, and the calls go on soon after it recovers.
func TestBreakerWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &outageServer{from: start.Add(time.Second), to: start.Add(9 * time.Second), settle: 10 * time.Millisecond}
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.DocV1.Copy(retries.WithBreaker(b))
		var (
			wg     sync.WaitGroup
			failed atomic.Int64
			outage atomic.Int64 // attempts that outages took, over all calls
		)
		for range 32 {
			wg.Go(func() {
				var st retries.State // the call's state after its last retried attempt
				pp := p.Copy(retries.WithAfter(func(_ context.Context, s retries.State) { st = s }))
				for time.Since(start) < 11*time.Second {
					st = retries.State{}
					err := pp.Do(t.Context(), srv.call)
					if err != nil {
						failed.Add(1)
						t.Errorf("call failed: %v", err)
					}
					outage.Add(int64(st.OutageAttempts))
				}
			})
		}
		wg.Wait()
		if n := srv.inOutage.Load(); n > 100 {
			t.Errorf("%d attempts reached the server while it was down, want at most 100", n)
		}
		if m := srv.maxAfter.Load(); m > 1 {
			t.Errorf("%d attempts at once during the outage once the breaker had opened, want 1 (one probe)", m)
		}
		if outage.Load() == 0 {
			t.Error("no attempt was counted as the outage's")
		}
		s := b.Stats()
		if s.Opened != 1 || s.State != retries.BreakerClosed || s.Probes == 0 {
			t.Errorf("Stats() = %+v, want opened once, closed again, with probes", s)
		}
		if s.OpenFor < 8*time.Second || s.OpenFor > 9*time.Second+50*time.Millisecond {
			t.Errorf("open for %v, want the 8 s outage and at most a probe interval more", s.OpenFor)
		}
	})
}

// TestBreakerRecoversWithinAProbeInterval: after a long outage the
// interval between probes is capped, so the calls resume within about
// MaxProbeInterval of the recovery.
func TestBreakerRecoversWithinAProbeInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &outageServer{from: start, to: start.Add(10 * time.Second)}
		b := retries.NewBreaker(retries.BreakerConfig{MaxProbeInterval: 500 * time.Millisecond})
		p := retries.Query.Copy(retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(10)), retries.WithBreaker(b))
		if err := p.Do(t.Context(), srv.call); err != nil {
			t.Fatalf("Do() = %v, want the call to wait the outage out", err)
		}
		if took := time.Since(start); took < 10*time.Second || took > 10*time.Second+550*time.Millisecond {
			t.Errorf("the call ended %v after the start, want within 500 ms of the recovery at 10 s", took)
		}
		// About 10 s / 500 ms probes once the interval reached its cap.
		if n := srv.inOutage.Load(); n > 40 {
			t.Errorf("%d attempts during a 10 s outage, want a probe every 500 ms at most", n)
		}
	})
}

// openBreaker returns a Breaker opened by failures.
func openBreaker(t *testing.T, c retries.BreakerConfig) *retries.Breaker {
	t.Helper()
	b := retries.NewBreaker(c)
	p := retries.New(retries.WithBreaker(b))
	for b.State() != retries.BreakerOpen {
		_ = p.Do(t.Context(), func(context.Context) error { return errDown })
	}
	return b
}

func TestBreakerFailFast(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := openBreaker(t, retries.BreakerConfig{FailFast: true})
		called := false
		err := retries.New(retries.WithBreaker(b)).Do(t.Context(), func(context.Context) error { called = true; return nil })
		var re *retries.RetryError
		if called || !errors.Is(err, retries.ErrBreakerOpen) || !errors.As(err, &re) || re.Attempts != 0 {
			t.Errorf("Do() = %v (called %v), want ErrBreakerOpen at once, with no attempt", err, called)
		}
		if want := "retries: circuit breaker open before the first attempt"; err == nil || err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		// A call whose first attempt went through before the breaker
		// opened keeps its last error too.
		b2 := retries.NewBreaker(retries.BreakerConfig{FailFast: true})
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(100)), retries.WithBreaker(b2))
		err = p.Do(t.Context(), func(context.Context) error { return errDown })
		if !errors.Is(err, retries.ErrBreakerOpen) || !errors.Is(err, errDown) {
			t.Errorf("Do() = %v, want it to match ErrBreakerOpen and the last error", err)
		}
	})
}

// TestBreakerTransientFailures: one failure in ten, under 64 goroutines,
// never opens the breaker.
func TestBreakerTransientFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithStop(retries.StopAfterAttempt(5)), retries.WithBreaker(b))
		var n atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 200 {
					_ = p.Do(t.Context(), func(context.Context) error {
						time.Sleep(time.Millisecond)
						if n.Add(1)%10 == 0 {
							return errDown
						}
						return nil
					})
				}
			})
		}
		wg.Wait()
		if s := b.Stats(); s.Opened != 0 || s.Failures == 0 {
			t.Errorf("Stats() = %+v, want failures and never opened", s)
		}
	})
}

// TestBreakerIgnoresAnswers: 429s and 404s are answers, never failures.
func TestBreakerIgnoresAnswers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{})
		throttle := retries.Throttle.Copy(retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(3)), retries.WithBreaker(b))
		for i := range 100 {
			code := http.StatusTooManyRequests
			if i%2 == 0 {
				code = http.StatusNotFound
			}
			resp, _ := retries.DoValue(t.Context(), throttle, func(context.Context) (*http.Response, error) {
				r, _ := response(code, "")
				return r, nil
			})
			resp.Body.Close()
		}
		if s := b.Stats(); s.Opened != 0 || s.Failures != 0 || s.Successes == 0 {
			t.Errorf("Stats() = %+v, want 404s counted as successes, 429s as nothing, never opened", s)
		}
	})
}

// TestBreakerWaitEndsWithContext: a call that waits for an open breaker
// ends with its context, with an error matching both.
func TestBreakerWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := openBreaker(t, retries.BreakerConfig{})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond) // before the first probe, at 50 ms
		defer cancel()
		err := retries.New(retries.WithBreaker(b)).Do(ctx, func(context.Context) error { return nil })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, retries.ErrBreakerOpen) {
			t.Errorf("Do() = %v, want it to match context.DeadlineExceeded and ErrBreakerOpen", err)
		}
		if s := b.Stats(); s.Probes != 0 {
			t.Errorf("probes = %d, want 0: the call ended before one was due", s.Probes)
		}
	})
}

// TestBreakerShared: copies of a policy share its breaker, and a nil one
// removes it.
func TestBreakerShared(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{FailFast: true})
		p := retries.New(retries.WithBreaker(b))
		q := p.Copy(retries.WithStop(retries.StopAfterAttempt(2)))
		for b.State() != retries.BreakerOpen {
			_ = q.Do(t.Context(), func(context.Context) error { return errDown })
		}
		if err := p.Do(t.Context(), func(context.Context) error { return nil }); !errors.Is(err, retries.ErrBreakerOpen) {
			t.Errorf("p.Do() = %v, want the copy's breaker open for p too", err)
		}
		if err := p.Copy(retries.WithBreaker(nil)).Do(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Errorf("without the breaker, Do() = %v, want nil", err)
		}
		for _, pol := range []retries.Policy{retries.Query, retries.DocV1, retries.Throttle, retries.SyncRequest,
			retries.Visit, retries.ControlPlane, retries.URLValidation} {
			if s := pol.String(); strings.Contains(s, "breaker") {
				t.Errorf("%s has a breaker", s)
			}
		}
	})
}

// TestBreakerThroughTransport: a server that answers 503 for 5 s, behind
// DocV1 with a breaker, loses no request.
func TestBreakerThroughTransport(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var during atomic.Int64
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			code := http.StatusOK
			if since := time.Since(start); since >= 100*time.Millisecond && since < 5100*time.Millisecond {
				code = http.StatusServiceUnavailable
				during.Add(1)
			}
			r, _ := response(code, "")
			return r, nil
		})
		b := retries.NewBreaker(retries.BreakerConfig{})
		client := &http.Client{Transport: retries.NewTransport(base, retries.DocV1.Copy(retries.WithBreaker(b)))}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 16 {
			wg.Go(func() {
				for time.Since(start) < 6*time.Second {
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://vespa/document/v1/x", nil)
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != http.StatusOK {
						failed.Add(1)
						if err == nil {
							resp.Body.Close()
						}
						continue
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n != 0 {
			t.Errorf("%d requests failed, want 0", n)
		}
		if n := during.Load(); n > 100 {
			t.Errorf("%d requests answered 503, want at most 100", n)
		}
	})
}

// TestBreakerThroughTransportLoopback: a real server on 127.0.0.1 that
// answers 503 for 300 ms, behind DocV1 around Throttle through two
// Transports, with the breaker and a limiter on the inner one, loses no
// request of 16 goroutines, and few reach it while it fails.
func TestBreakerThroughTransportLoopback(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		from, to time.Time
		served   atomic.Int64
		during   atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if served.Add(1) == 200 {
			from = time.Now()
			to = from.Add(300 * time.Millisecond)
		}
		out := !from.IsZero() && time.Now().Before(to)
		mu.Unlock()
		if out {
			during.Add(1)
			http.Error(w, "no distributor", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	b := retries.NewBreaker(retries.BreakerConfig{MaxProbeInterval: 20 * time.Millisecond})
	inner := retries.Throttle.Copy(retries.WithBreaker(b), retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{})),
		retries.WithRetry(retries.RetryAny(retries.Throttle.Retry(), retries.RetryIfOutage(b, retries.DocV1.Retry()))))
	// The outer layer waits 20 ms between attempts, long enough for the
	// failures of the 16 goroutines to open the breaker: with no wait, one
	// goroutine could spend its 3 attempts before it opens.
	outer := retries.DocV1.Copy(retries.WithWait(retries.WaitFixed(20 * time.Millisecond)))
	client := &http.Client{Transport: retries.NewTransport(retries.NewTransport(http.DefaultTransport, inner), outer)}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for served.Load() < 2000 {
				resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"fields":{}}`))
				if err != nil {
					t.Errorf("request failed: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request answered %s", resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d requests, %d answered 503", served.Load(), during.Load())
	if s := b.Stats(); s.Opened == 0 || s.State != retries.BreakerClosed {
		t.Errorf("Stats() = %+v, want opened, and closed again", s)
	}
	if n := during.Load(); n > 100 {
		t.Errorf("%d requests answered 503, want at most 100", n)
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBreakerAllocatesNothing: a closed breaker adds no allocation to a
// first-try success, nor to fail, fail, succeed.
func TestBreakerAllocatesNothing(t *testing.T) {
	b := retries.NewBreaker(retries.BreakerConfig{})
	p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithBreaker(b))
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = p.Do(ctx, func(context.Context) error { return nil }) }); n != 0 {
		t.Errorf("%v allocations per first-try success, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		calls := 0
		_ = p.Do(ctx, func(context.Context) error {
			if calls++; calls < 3 {
				return errDown
			}
			return nil
		})
	}); n != 0 {
		t.Errorf("%v allocations per fail, fail, succeed, want 0", n)
	}
	if s := b.Stats(); s.State != retries.BreakerClosed || s.Failures != 2*101 {
		t.Errorf("Stats() = %+v, want closed after 202 failures", s)
	}
}

func TestBreakerStateString(t *testing.T) {
	for s, want := range map[retries.BreakerState]string{
		retries.BreakerClosed: "closed", retries.BreakerHalfOpen: "half-open", retries.BreakerOpen: "open", 7: "BreakerState(7)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", s, got, want)
		}
	}
}

// TestBreakerOnStateChange: a 3 s outage with 8 goroutines reports every
// change once, in order (each from is the previous to), from closed to
// open and, through failed probes, back to closed; the callback may read
// the breaker.
func TestBreakerOnStateChange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &outageServer{from: start.Add(100 * time.Millisecond), to: start.Add(3 * time.Second)}
		var mu sync.Mutex
		var changes [][2]retries.BreakerState
		var b *retries.Breaker
		b = retries.NewBreaker(retries.BreakerConfig{OnStateChange: func(from, to retries.BreakerState) {
			_ = b.Stats() // no deadlock: the breaker's lock is not held
			mu.Lock()
			changes = append(changes, [2]retries.BreakerState{from, to})
			mu.Unlock()
		}})
		p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithBreaker(b))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for time.Since(start) < 4*time.Second {
					if err := p.Do(t.Context(), srv.call); err != nil {
						t.Errorf("Do() = %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if len(changes) < 4 {
			t.Fatalf("changes = %v, want closed→open, probes, and back to closed", changes)
		}
		prev := retries.BreakerClosed
		for i, c := range changes {
			if c[0] != prev || c[0] == c[1] {
				t.Errorf("change %d is %v→%v after %v", i, c[0], c[1], prev)
			}
			prev = c[1]
		}
		if first := changes[0]; first != [2]retries.BreakerState{retries.BreakerClosed, retries.BreakerOpen} {
			t.Errorf("first change %v→%v, want closed→open", first[0], first[1])
		}
		if prev != retries.BreakerClosed || b.Stats().Opened != 1 {
			t.Errorf("last state %v, opened %d times; want closed, once", prev, b.Stats().Opened)
		}
	})
}

// TestBreakerBesideLimiterSendsNoBurst: 64 goroutines share a breaker and
// a limiter of 4 in flight, so that most calls wait in the limiter's queue
// when the server goes away. Those calls go back to wait for the breaker
// when their turn comes, instead of sending their attempts into the outage.
func TestBreakerBesideLimiterSendsNoBurst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &outageServer{from: start.Add(time.Second), to: start.Add(5 * time.Second)}
		b := retries.NewBreaker(retries.BreakerConfig{})
		l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 4})
		p := retries.DocV1.Copy(retries.WithBreaker(b), retries.WithLimiter(l))
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for time.Since(start) < 6*time.Second {
					if err := p.Do(t.Context(), srv.call); err != nil {
						t.Errorf("call failed: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d attempts in the outage", srv.inOutage.Load())
		// 4 in flight, what it takes to open (15 of 20), and about 10
		// probes: far fewer than the 64 calls queued.
		if n := srv.inOutage.Load(); n > 40 {
			t.Errorf("%d attempts reached the server while it was down, want at most 40", n)
		}
	})
}

// TestRetryIfOutage: DocV1 around Throttle, with the breaker and a limiter
// on the inner layer and RetryIfOutage in its predicate, waits an 8 s
// outage out with 32 goroutines, and the outer layer spends at most one
// attempt per call on it (a failure before the breaker opened).
func TestRetryIfOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &outageServer{from: start.Add(time.Second), to: start.Add(9 * time.Second), err: errRefused}
		b := retries.NewBreaker(retries.BreakerConfig{})
		inner := retries.Throttle.Copy(retries.WithBreaker(b), retries.WithLimiter(retries.NewLimiter(retries.LimiterConfig{})),
			retries.WithRetry(retries.RetryAny(retries.Throttle.Retry(), retries.RetryIfOutage(b, retries.DocV1.Retry()))))
		var wg sync.WaitGroup
		var outerRetries atomic.Int64
		outer := retries.DocV1.Copy(retries.WithAfter(func(context.Context, retries.State) { outerRetries.Add(1) }))
		calls := atomic.Int64{}
		for range 32 {
			wg.Go(func() {
				for time.Since(start) < 10*time.Second {
					calls.Add(1)
					err := outer.Do(t.Context(), func(ctx context.Context) error { return inner.Do(ctx, srv.call) })
					if err != nil {
						t.Errorf("call failed: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d calls, %d outer retries, %d attempts in the outage", calls.Load(), outerRetries.Load(), srv.inOutage.Load())
		if n := outerRetries.Load(); n > 32 {
			t.Errorf("the outer layer retried %d times, want at most once per goroutine", n)
		}
		if n := srv.inOutage.Load(); n > 100 {
			t.Errorf("%d attempts reached the server while it was down, want at most 100", n)
		}
		if got := retries.RetryIfOutage(b, retries.RetryIfStatus(503)).String(); got != "RetryIfOutage(RetryIfStatus(503))" {
			t.Errorf("String() = %q", got)
		}
	})
}

// TestBreakerStaleSuccessKeepsItOpen: an attempt let through while the
// breaker was closed that succeeds after it opened (it was on the wire
// when the server went away) says nothing of the server since, and does
// not close the breaker; the next probe decides. Before, it closed it, and
// the attempts after it met the outage with the breaker closed.
func TestBreakerStaleSuccessKeepsItOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithBreaker(b))
		release := make(chan struct{})
		staleDone := make(chan error)
		go func() { // admitted while closed, answered once the breaker is open
			staleDone <- p.Do(t.Context(), func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait()
		for b.State() != retries.BreakerOpen {
			_ = p.Do(t.Context(), func(context.Context) error { return errDown })
		}
		close(release)
		if err := <-staleDone; err != nil {
			t.Fatalf("the stale attempt's call = %v, want its success", err)
		}
		if s := b.State(); s == retries.BreakerClosed {
			t.Errorf("a success of an attempt let through before the opening closed the breaker")
		}
		// A probe's success closes it.
		if err := p.Do(t.Context(), func(context.Context) error { return nil }); err != nil || b.State() != retries.BreakerClosed {
			t.Errorf("after a probe's success: %v, state %v; want closed", err, b.State())
		}
	})
}

// TestBreakerJudgesForItself: a Breaker counts outcomes by its own rule,
// whatever limiter sits beside it. A limiter whose Backpressure is a 503
// does not make a Breaker ignore 503s (before, the Breaker took the
// limiter's rule), and BreakerConfig.Backpressure makes it ignore them.
func TestBreakerJudgesForItself(t *testing.T) {
	t.Parallel()
	is503 := retries.RetryIfStatus(http.StatusServiceUnavailable)
	for _, tc := range []struct {
		name     string
		cfg      retries.BreakerConfig
		failures bool
	}{
		{"default", retries.BreakerConfig{}, true},
		{"own_backpressure", retries.BreakerConfig{Backpressure: is503}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := retries.NewBreaker(tc.cfg)
				l := retries.NewLimiter(retries.LimiterConfig{Backpressure: is503})
				p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithBreaker(b), retries.WithLimiter(l))
				resp, _ := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
					r, _ := response(http.StatusServiceUnavailable, "")
					return r, nil
				})
				resp.Body.Close()
				if s := b.Stats(); (s.Failures > 0) != tc.failures {
					t.Errorf("Stats() = %+v; want failures counted: %v", s, tc.failures)
				}
			})
		})
	}
}

// TestBreakerThresholds: Window, Failures and Streak set when the breaker
// opens. A call that fails every other attempt never opens the default
// breaker (10 of 20 is below 15, and no 5 in a row), opens one that opens
// at 10 of 20, and one of Window 4 and Failures 2; a Streak of 2 opens
// on two failures in a row spanning a second, and a negative Streak never.
func TestBreakerThresholds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cfg      retries.BreakerConfig
		pattern  []bool // failures, repeated
		wantOpen bool
	}{
		{"default, every other", retries.BreakerConfig{}, []bool{true, false}, false},
		{"10 of 20", retries.BreakerConfig{Failures: 10}, []bool{true, false}, true},
		{"window 4, 2 failures, one in four", retries.BreakerConfig{Window: 4, Failures: 2}, []bool{true, false, false, false}, false},
		{"window 4, 2 failures, every other", retries.BreakerConfig{Window: 4, Failures: 2}, []bool{true, false}, true},
		{"window 4 opens at 3", retries.BreakerConfig{Window: 4}, []bool{true, true, false}, true},
		{"streak 2", retries.BreakerConfig{Streak: 2, Failures: 100}, []bool{true, true, false}, true},
		{"no streak", retries.BreakerConfig{Streak: -1, Failures: 100}, []bool{true, true, true, true, true, true, false}, false},
		{"default streak", retries.BreakerConfig{Failures: 100}, []bool{true, true, true, true, true, true, false}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := retries.NewBreaker(tc.cfg)
				p := retries.New(retries.WithStop(retries.StopAfterAttempt(1)), retries.WithBreaker(b))
				attempt := 0
				for range 60 {
					_ = p.Do(t.Context(), func(context.Context) error {
						time.Sleep(300 * time.Millisecond) // a streak spans a second
						attempt++
						if tc.pattern[(attempt-1)%len(tc.pattern)] {
							return errDown
						}
						return nil
					})
					if b.Stats().Opened > 0 {
						break
					}
				}
				if got := b.Stats().Opened > 0; got != tc.wantOpen {
					t.Errorf("opened %v, want %v (%+v)", got, tc.wantOpen, b.Stats())
				}
			})
		})
	}
}

// TestBreakerProbesAnAnsweringServerOften: probes answered with a 503
// lengthen the interval between probes to 100 ms at most, where probes
// that meet a connection error double it to MaxProbeInterval: a server
// that answers is there, failing some requests, and the next probe may
// pass. A feed against a server failing
// half its requests went seconds without an operation ending, the
// interval doubled to 1 s while half the probes failed.
func TestBreakerProbesAnAnsweringServerOften(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fail  func() (*http.Response, error)
		grows bool
	}{
		{"503", func() (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody}, nil
		}, false},
		{"connection refused", func() (*http.Response, error) { return nil, errRefused }, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			b := retries.NewBreaker(retries.BreakerConfig{})
			p := retries.New(retries.WithBreaker(b), retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(100)),
				retries.WithRetry(retries.RetryAny(retries.RetryIfStatus(503), retries.RetryIfError(retries.IsConnectionError))))
			var times []time.Time
			_, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
				if b.State() != retries.BreakerClosed {
					times = append(times, time.Now())
				}
				if len(times) > 6 {
					return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
				}
				return tc.fail()
			})
			if err != nil || len(times) != 7 {
				t.Fatalf("%s: DoValue() = %v after %d probes, want success after 7", tc.name, err, len(times))
			}
			last := times[len(times)-1].Sub(times[len(times)-2])
			if grew := last > 100*time.Millisecond; grew != tc.grows {
				t.Errorf("%s: the last interval between probes %v; want it grown %v", tc.name, last, tc.grows)
			}
		})
	}
}

// TestBreakerFullOutageOfAnswers, in fake time: a server that answers 503
// to everything for 8 s draws probes every 100 ms at most for 8 probes,
// then at intervals that double to MaxProbeInterval: at most 20 in the 8 s
// (it drew 80, one every 100 ms, and a feed sent 86-94 requests into such
// an outage where it had sent 27-34); the first probe after the outage
// closes the breaker within MaxProbeInterval of its end.
func TestBreakerFullOutageOfAnswers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithBreaker(b), retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopNever()),
			retries.WithRetry(retries.RetryIfStatus(503)))
		start := time.Now()
		const outage = 8 * time.Second
		var probes int
		_, err := retries.DoValue(t.Context(), p, func(context.Context) (*http.Response, error) {
			if b.State() != retries.BreakerClosed {
				probes++
			}
			if time.Since(start) < outage {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		})
		recovered := time.Since(start) - outage
		if err != nil || probes > 20 || recovered > time.Second {
			t.Errorf("DoValue() = %v after %d probes, recovered %v after the outage; want at most 20 probes in 8 s and recovery within 1 s", err, probes, recovered)
		}
		t.Logf("%d probes in 8 s, recovered %v after", probes, recovered)
	})
}
