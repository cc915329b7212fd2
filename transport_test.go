package retries_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// These tests run real servers on 127.0.0.1 and real http.Transports, with
// the policies' waits removed, so nothing in them sleeps through a wait.

var tpNoWait = retries.WithWait(retries.WaitNone())

// tpServer is a loopback server that counts requests and new connections and
// keeps the body of every request.
type tpServer struct {
	*httptest.Server
	requests atomic.Int64
	newConns atomic.Int64

	mu     sync.Mutex
	bodies []string
}

// tpServe starts a server whose handler gets the number of the request, from
// 1, after its body has been read and recorded.
func tpServe(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) *tpServer {
	t.Helper()
	s := &tpServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server: reading request body: %v", err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		h(w, r, int(s.requests.Add(1)))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *tpServer) gotBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// tpStatuses answers with codes in turn, then with the last one forever;
// every answer has a small body naming its status.
func tpStatuses(codes ...int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d: %s", n, http.StatusText(code))
	}
}

// tpTracker wraps a real http.Transport and counts response bodies that are
// still open, so a test can prove that every retried response was closed.
type tpTracker struct {
	base *http.Transport
	open atomic.Int64
}

func tpNewTracker(t *testing.T) *tpTracker {
	t.Helper()
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return &tpTracker{base: base}
}

func (tr *tpTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.base.RoundTrip(req)
	if resp != nil {
		tr.open.Add(1)
		resp.Body = &tpTrackedBody{ReadCloser: resp.Body, open: &tr.open}
	}
	return resp, err
}

func (tr *tpTracker) CloseIdleConnections() { tr.base.CloseIdleConnections() }

type tpTrackedBody struct {
	io.ReadCloser
	open   *atomic.Int64
	closed atomic.Bool
}

func (b *tpTrackedBody) Close() error {
	if !b.closed.Swap(true) {
		b.open.Add(-1)
	}
	return b.ReadCloser.Close()
}

type tpRoundTripFunc func(*http.Request) (*http.Response, error)

func (f tpRoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// tpPost builds a POST whose body http.NewRequest can replay (GetBody set).
func tpPost(t *testing.T, ctx context.Context, rawURL, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil {
		t.Fatal("http.NewRequest did not set GetBody for a *bytes.Reader")
	}
	return req
}

// tpRead reads and closes a response body.
func tpRead(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	return string(b)
}

func TestTransportRetriesUntilSuccess(t *testing.T) {
	const payload = `{"fields":{"title":"a document that must arrive whole"}}`
	for _, tc := range []struct {
		name   string
		policy retries.Policy
		n      int // 429s before the 200
		method string
	}{
		{"Throttle/no 429", retries.Throttle, 0, http.MethodPost},
		{"Throttle/one 429", retries.Throttle, 1, http.MethodPost},
		{"Throttle/five 429s", retries.Throttle, 5, http.MethodPost},
		{"SyncRequest/five 429s", retries.SyncRequest, 5, http.MethodPost},
		{"Throttle/PUT", retries.Throttle, 3, http.MethodPut},
		{"Throttle/GET without body", retries.Throttle, 3, http.MethodGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			codes := make([]int, 0, tc.n+1)
			for range tc.n {
				codes = append(codes, http.StatusTooManyRequests)
			}
			srv := tpServe(t, tpStatuses(append(codes, http.StatusOK)...))
			tracker := tpNewTracker(t)
			client := &http.Client{Transport: retries.NewTransport(tracker, tc.policy.Copy(tpNoWait))}

			body := payload
			if tc.method == http.MethodGet {
				body = ""
			}
			req, err := http.NewRequest(tc.method, srv.URL+"/document/v1/ns/doc/docid/1", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("Do() error = %v, want nil", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			if got, want := tpRead(t, resp), fmt.Sprintf("answer %d: OK", tc.n+1); got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := srv.requests.Load(), int64(tc.n+1); got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
			for i, b := range srv.gotBodies() {
				if b != body {
					t.Errorf("request %d had body %q, want %q", i+1, b, body)
				}
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}
}

func TestTransportGivingUp(t *testing.T) {
	for _, tc := range []struct {
		name         string
		policy       retries.Policy
		code         int
		wantRequests int64
		// wantAttempts > 0: RoundTrip returns a *RetryError with this many
		// attempts; 0: it returns the last response with a nil error.
		wantAttempts int
	}{
		{"DocV1 returns the last 503", retries.DocV1, http.StatusServiceUnavailable, 3, 0},
		{"SyncRequest returns the last 429", retries.SyncRequest, http.StatusTooManyRequests, 11, 0},
		{"RetryError closes the last 429", retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(4))), http.StatusTooManyRequests, 4, 4},
		{"reraise closes the last 503", retries.New(retries.WithStop(retries.StopAfterAttempt(2)), retries.WithRetry(retries.RetryIfStatus(503)), retries.WithReraise(true)), http.StatusServiceUnavailable, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(tc.code))
			tracker := tpNewTracker(t)
			rt := retries.NewTransport(tracker, tc.policy.Copy(tpNoWait))

			resp, err := rt.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
			if got := srv.requests.Load(); got != tc.wantRequests {
				t.Errorf("server saw %d requests, want %d", got, tc.wantRequests)
			}
			if tc.wantAttempts == 0 {
				if err != nil {
					t.Fatalf("RoundTrip() error = %v, want nil", err)
				}
				if resp.StatusCode != tc.code {
					t.Errorf("status = %d, want %d", resp.StatusCode, tc.code)
				}
				if tracker.open.Load() != 1 {
					t.Errorf("%d bodies open before reading, want 1 (the returned one)", tracker.open.Load())
				}
				want := fmt.Sprintf("answer %d: %s", tc.wantRequests, http.StatusText(tc.code))
				if got := tpRead(t, resp); got != want {
					t.Errorf("body = %q, want %q", got, want)
				}
			} else {
				if resp != nil {
					t.Errorf("RoundTrip() returned a response with error %v", err)
				}
				var re *retries.RetryError
				if !errors.As(err, &re) {
					t.Fatalf("RoundTrip() error = %v, want a *RetryError", err)
				}
				if re.Attempts != tc.wantAttempts {
					t.Errorf("Attempts = %d, want %d", re.Attempts, tc.wantAttempts)
				}
				if last, ok := re.Value.(*http.Response); !ok || last.StatusCode != tc.code {
					t.Errorf("RetryError.Value = %v, want the last %d response", re.Value, tc.code)
				}
				var te *retries.TransportError
				if !errors.As(err, &te) || te.Method != http.MethodPost {
					t.Errorf("RoundTrip() error = %#v, want a *TransportError for POST", err)
				}
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}
}

// TestTransportReusesConnections is the leak test: 50 retried 429s through
// one client use one connection, because every retried response is drained
// and closed. With a discard step that leaves them open, every attempt needs
// a new connection: 51 here.
func TestTransportReusesConnections(t *testing.T) {
	const n = 50
	codes := make([]int, 0, n+1)
	for range n {
		codes = append(codes, http.StatusTooManyRequests)
	}
	codes = append(codes, http.StatusOK)

	for _, tc := range []struct {
		name       string
		leak       bool
		atMost     int64
		atLeast    int64
		wantStatus int
	}{
		{name: "drained", atMost: 3, atLeast: 1},
		{name: "not drained", leak: true, atMost: n + 1, atLeast: n - 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(codes...))
			p := retries.Throttle.Copy(tpNoWait)
			var kept []*http.Response
			if tc.leak {
				// A discard step that keeps the responses open (they are
				// closed at the end, so the test itself leaks nothing).
				p = p.Copy(retries.WithDiscard(func(v any) { kept = append(kept, v.(*http.Response)) }))
			}
			tracker := tpNewTracker(t)
			client := &http.Client{Transport: retries.NewTransport(tracker, p)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			tpRead(t, resp)
			for _, r := range kept {
				r.Body.Close()
			}
			if got := srv.requests.Load(); got != n+1 {
				t.Errorf("server saw %d requests, want %d", got, n+1)
			}
			if got := srv.newConns.Load(); got < tc.atLeast || got > tc.atMost {
				t.Errorf("server saw %d new connections, want %d to %d", got, tc.atLeast, tc.atMost)
			}
			t.Logf("%d requests over %d connections", srv.requests.Load(), srv.newConns.Load())
		})
	}
}

// tpDropper fails the first requests by hijacking the connection, writing
// partial (possibly empty), and closing it; then it answers 200.
func tpDropper(t *testing.T, failures int, partial string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		if n > failures {
			fmt.Fprint(w, "ok")
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		buf.WriteString(partial)
		buf.Flush()
		conn.Close()
	}
}

func TestTransportRetriesDroppedConnections(t *testing.T) {
	for _, tc := range []struct {
		name, partial string
	}{
		{"closed before the response", ""},
		{"closed inside the header", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const failures = 3
			srv := tpServe(t, tpDropper(t, failures, tc.partial))
			var attemptErrs []error
			p := retries.SyncRequest.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { attemptErrs = append(attemptErrs, s.Err) }))
			client := &http.Client{Transport: retries.NewTransport(tpNewTracker(t), p)}

			resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"n":1}`))
			if err != nil {
				t.Fatalf("Post() error = %v, want nil", err)
			}
			if got := tpRead(t, resp); got != "ok" {
				t.Errorf("body = %q, want ok", got)
			}
			if got := srv.requests.Load(); got != failures+1 {
				t.Errorf("server saw %d requests, want %d", got, failures+1)
			}
			if len(attemptErrs) != failures {
				t.Fatalf("%d retried attempts, want %d", len(attemptErrs), failures)
			}
			for i, err := range attemptErrs {
				if !retries.IsConnectionError(err) {
					t.Errorf("attempt %d: IsConnectionError(%v) = false, want true", i+1, err)
				}
			}
			for i, b := range srv.gotBodies() {
				if b != `{"n":1}` {
					t.Errorf("request %d had body %q", i+1, b)
				}
			}
		})
	}
}

func TestTransportNonReplayableBody(t *testing.T) {
	const payload = "a body that can be read only once"
	// onceReader is an io.Reader that http.NewRequest cannot replay.
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name       string
		handler    func(http.ResponseWriter, *http.Request, int)
		dropGet    bool // build from a bytes.Reader, then remove GetBody
		wantStatus int  // 0: an error matching ErrBodyNotReplayable
		wantCode   int  // the StatusError in that error; 0: none
		wantConn   bool // the error is a connection error
	}{
		{name: "io.Reader body, 429", handler: tpStatuses(429), wantCode: 429},
		{name: "GetBody removed, 429", handler: tpStatuses(429), dropGet: true, wantCode: 429},
		{name: "dropped connection", handler: tpDropper(t, 100, ""), wantConn: true},
		{name: "success is returned", handler: tpStatuses(200), wantStatus: 200},
		{name: "status the policy does not retry", handler: tpStatuses(400), wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tc.handler)
			tracker := tpNewTracker(t)
			rt := retries.NewTransport(tracker, retries.SyncRequest.Copy(tpNoWait))
			var body io.Reader = onceReader{strings.NewReader(payload)}
			if tc.dropGet {
				body = strings.NewReader(payload)
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.dropGet {
				req.GetBody = nil
			}

			resp, err := rt.RoundTrip(req)
			if got := srv.requests.Load(); got != 1 {
				t.Errorf("server saw %d requests, want 1", got)
			}
			if got := srv.gotBodies(); len(got) != 1 || got[0] != payload {
				t.Errorf("server got bodies %q, want one %q", got, payload)
			}
			if tc.wantStatus != 0 {
				if err != nil {
					t.Fatalf("RoundTrip() error = %v, want nil", err)
				}
				if resp.StatusCode != tc.wantStatus {
					t.Errorf("status = %d, want %d", resp.StatusCode, tc.wantStatus)
				}
				tpRead(t, resp)
				return
			}
			if resp != nil {
				t.Errorf("RoundTrip() returned a response with error %v", err)
			}
			if !errors.Is(err, retries.ErrBodyNotReplayable) {
				t.Fatalf("RoundTrip() error = %v, want one matching ErrBodyNotReplayable", err)
			}
			if !strings.Contains(err.Error(), "GetBody") {
				t.Errorf("error %q does not say why it was not retried", err)
			}
			var se *retries.StatusError
			if got := errors.As(err, &se); got != (tc.wantCode != 0) || got && se.StatusCode != tc.wantCode {
				t.Errorf("StatusError in %v: %v, want status %d", err, se, tc.wantCode)
			}
			if got := retries.IsConnectionError(err); got != tc.wantConn {
				t.Errorf("IsConnectionError(%v) = %v, want %v", err, got, tc.wantConn)
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}

	t.Run("two layers say it once", func(t *testing.T) {
		srv := tpServe(t, tpStatuses(429))
		inner := retries.NewTransport(tpNewTracker(t), retries.Throttle.Copy(tpNoWait))
		rt := retries.NewTransport(inner, retries.DocV1.Copy(tpNoWait))
		req, err := http.NewRequest(http.MethodPost, srv.URL, onceReader{strings.NewReader(payload)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.RoundTrip(req)
		if !errors.Is(err, retries.ErrBodyNotReplayable) {
			t.Fatalf("RoundTrip() error = %v, want one matching ErrBodyNotReplayable", err)
		}
		if n := strings.Count(err.Error(), "GetBody"); n != 1 {
			t.Errorf("error %q explains itself %d times, want once", err, n)
		}
		if got := srv.requests.Load(); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
	})
}

func TestTransportIdempotentOnly(t *testing.T) {
	for _, tc := range []struct {
		name         string
		method       string
		header       string
		opts         []retries.TransportOption
		wantRequests int64
	}{
		{"default retries a replayable POST", http.MethodPost, "", nil, 11},
		{"POST is sent once", http.MethodPost, "", []retries.TransportOption{retries.WithIdempotentOnly()}, 1},
		{"PATCH is sent once", http.MethodPatch, "", []retries.TransportOption{retries.WithIdempotentOnly()}, 1},
		{"PUT is retried", http.MethodPut, "", []retries.TransportOption{retries.WithIdempotentOnly()}, 11},
		{"DELETE is retried", http.MethodDelete, "", []retries.TransportOption{retries.WithIdempotentOnly()}, 11},
		{"POST with Idempotency-Key is retried", http.MethodPost, "Idempotency-Key", []retries.TransportOption{retries.WithIdempotentOnly()}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(429))
			tracker := tpNewTracker(t)
			rt := retries.NewTransport(tracker, retries.SyncRequest.Copy(tpNoWait), tc.opts...)
			req, err := http.NewRequest(tc.method, srv.URL, strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set(tc.header, "k-1")
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip() error = %v, want the last 429 with nil", err)
			}
			if resp.StatusCode != 429 {
				t.Errorf("status = %d, want 429", resp.StatusCode)
			}
			tpRead(t, resp)
			if got := srv.requests.Load(); got != tc.wantRequests {
				t.Errorf("server saw %d requests, want %d", got, tc.wantRequests)
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}
}

// tpSettleGoroutines waits, briefly, for the goroutine count to come back
// to base, and fails with a dump of every goroutine if it does not.
func tpSettleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond) // polling for goroutines to exit, not a retry wait
	}
}

func TestTransportCancelDuringWait(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		srv := tpServe(t, tpStatuses(503))
		defer srv.Close()
		sleeping := make(chan struct{}, 1)
		p := retries.DocV1.Copy(
			retries.WithWait(retries.WaitFixed(time.Hour)),
			retries.WithBeforeSleep(func(context.Context, retries.State) { sleeping <- struct{}{} }),
		)
		tracker := tpNewTracker(t)
		defer tracker.CloseIdleConnections()
		client := &http.Client{Transport: retries.NewTransport(tracker, p)}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-sleeping // the first 503 has arrived and the hour-long wait begins
			cancel()
		}()
		req := tpPost(t, ctx, srv.URL, "doc")
		done := make(chan struct{})
		var (
			resp *http.Response
			err  error
		)
		go func() {
			defer close(done)
			resp, err = client.Do(req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Do() did not return after the context was canceled")
		}
		if resp != nil {
			t.Errorf("Do() returned a response with error %v", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do() error = %v, want one matching context.Canceled", err)
		}
		var re *retries.RetryError
		if !errors.As(err, &re) || re.Attempts != 1 {
			t.Errorf("Do() error = %v, want a *RetryError after 1 attempt", err)
		}
		if got := srv.requests.Load(); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
		if open := tracker.open.Load(); open != 0 {
			t.Errorf("%d response bodies left open, want 0", open)
		}
	}()
	tpSettleGoroutines(t, base)
}

func TestTransportAttemptTimeout(t *testing.T) {
	syncWithTimeouts := retries.SyncRequest.Copy(retries.WithRetry(retries.RetryAny(
		retries.SyncRequest.Retry(), retries.RetryIfErrorIs(retries.ErrAttemptTimeout))))
	for _, tc := range []struct {
		name    string
		policy  retries.Policy
		retried bool
	}{
		{"DocV1 retries a stalled attempt", retries.DocV1, true},
		{"SyncRequest with ErrAttemptTimeout retries it", syncWithTimeouts, true},
		{"SyncRequest alone does not", retries.SyncRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := tpServe(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					select { // stall until the client gives up on this attempt
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				fmt.Fprint(w, "ok")
			})
			defer close(release)
			var attemptErrs []error
			p := tc.policy.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { attemptErrs = append(attemptErrs, s.Err) }))
			tracker := tpNewTracker(t)
			rt := retries.NewTransport(tracker, p, retries.WithAttemptTimeout(250*time.Millisecond))

			resp, err := rt.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
			if !tc.retried {
				if resp != nil || !errors.Is(err, retries.ErrAttemptTimeout) {
					t.Fatalf("RoundTrip() = %v, %v, want an error matching ErrAttemptTimeout", resp, err)
				}
				if got := srv.requests.Load(); got != 1 {
					t.Errorf("server saw %d requests, want 1", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("RoundTrip() error = %v, want nil", err)
			}
			if got := tpRead(t, resp); got != "ok" {
				t.Errorf("body = %q, want ok", got)
			}
			if got := srv.requests.Load(); got != 2 {
				t.Errorf("server saw %d requests, want 2", got)
			}
			if len(attemptErrs) != 1 {
				t.Fatalf("%d retried attempts, want 1", len(attemptErrs))
			}
			err = attemptErrs[0]
			if !errors.Is(err, retries.ErrAttemptTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("attempt error = %v, want ErrAttemptTimeout and no context error", err)
			}
			var timeout interface{ Timeout() bool }
			if !errors.As(err, &timeout) || !timeout.Timeout() {
				t.Errorf("attempt error %v does not report Timeout() = true", err)
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}

	t.Run("a base that reports only the context's error", func(t *testing.T) {
		release := make(chan struct{})
		srv := tpServe(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return
			}
			fmt.Fprint(w, "ok")
		})
		defer close(release)
		tracker := tpNewTracker(t)
		// Some RoundTrippers report a canceled request with ctx.Err(), not
		// its cause: the timeout must still be told from a cancellation.
		base := tpRoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := tracker.RoundTrip(req)
			if err != nil && req.Context().Err() != nil {
				err = req.Context().Err()
			}
			return resp, err
		})
		var attemptErrs []error
		p := retries.DocV1.Copy(tpNoWait, retries.WithAfter(func(_ context.Context, s retries.State) { attemptErrs = append(attemptErrs, s.Err) }))
		resp, err := retries.NewTransport(base, p, retries.WithAttemptTimeout(250*time.Millisecond)).
			RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
		if err != nil {
			t.Fatalf("RoundTrip() error = %v, want nil", err)
		}
		tpRead(t, resp)
		if len(attemptErrs) != 1 || !errors.Is(attemptErrs[0], retries.ErrAttemptTimeout) || errors.Is(attemptErrs[0], context.Canceled) {
			t.Errorf("attempt errors = %v, want one matching ErrAttemptTimeout and not context.Canceled", attemptErrs)
		}
	})

	t.Run("the caller's deadline is not retried", func(t *testing.T) {
		release := make(chan struct{})
		srv := tpServe(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		rt := retries.NewTransport(tpNewTracker(t), retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()

		resp, err := rt.RoundTrip(tpPost(t, ctx, srv.URL, "doc"))
		if resp != nil {
			t.Errorf("RoundTrip() returned a response with error %v", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, retries.ErrAttemptTimeout) {
			t.Errorf("RoundTrip() error = %v, want context.DeadlineExceeded, not ErrAttemptTimeout", err)
		}
		if got := srv.requests.Load(); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
	})

	t.Run("the body outlives the limit", func(t *testing.T) {
		const limit = 100 * time.Millisecond
		srv := tpServe(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			fmt.Fprint(w, "header arrives in time, ")
			w.(http.Flusher).Flush()
			time.Sleep(3 * limit) // the rest of the body comes after the limit
			fmt.Fprint(w, "body after it")
		})
		rt := retries.NewTransport(tpNewTracker(t), retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(limit))
		resp, err := rt.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
		if err != nil {
			t.Fatalf("RoundTrip() error = %v, want nil", err)
		}
		attemptCtx := resp.Request.Context()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the body after the limit: %v", err)
		}
		if got, want := string(body), "header arrives in time, body after it"; got != want {
			t.Errorf("body = %q, want %q", got, want)
		}
		resp.Body.Close()
		if attemptCtx.Err() == nil {
			t.Error("the attempt's context is still live after the body was read and closed")
		}
	})

	t.Run("closing an unread body ends the attempt", func(t *testing.T) {
		srv := tpServe(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			fmt.Fprint(w, strings.Repeat("x", 1000))
		})
		rt := retries.NewTransport(tpNewTracker(t), retries.DocV1.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))
		resp, err := rt.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
		if err != nil {
			t.Fatalf("RoundTrip() error = %v, want nil", err)
		}
		attemptCtx := resp.Request.Context()
		if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if attemptCtx.Err() != nil {
			t.Fatal("the attempt's context ended before the body was closed")
		}
		resp.Body.Close()
		if attemptCtx.Err() == nil {
			t.Error("the attempt's context is still live after the body was closed")
		}
	})
}

func TestTransportLeavesRequestAlone(t *testing.T) {
	const payload = "the request body"
	srv := tpServe(t, tpStatuses(429, 429, 200))
	rt := retries.NewTransport(tpNewTracker(t), retries.Throttle.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))

	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "caller")
	req := tpPost(t, ctx, srv.URL+"/path?q=1", payload)
	req.Header.Set("X-Token", "t-1")
	req.Header.Set("Content-Type", "text/plain")
	var (
		wantURL    = req.URL
		wantURLStr = req.URL.String()
		wantHeader = req.Header.Clone()
		wantBody   = req.Body
		wantLen    = req.ContentLength
	)

	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip() error = %v", err)
	}
	tpRead(t, resp)
	if resp.Request == req {
		t.Error("the caller's request was sent itself, want a clone")
	}
	if req.Context() != ctx {
		t.Error("the request's context changed")
	}
	if req.URL != wantURL || req.URL.String() != wantURLStr {
		t.Errorf("URL = %v, want %v", req.URL, wantURLStr)
	}
	if fmt.Sprint(req.Header) != fmt.Sprint(wantHeader) {
		t.Errorf("Header = %v, want %v", req.Header, wantHeader)
	}
	if req.Body != wantBody || req.ContentLength != wantLen || req.Method != http.MethodPost {
		t.Errorf("Body, ContentLength or Method changed: %v %d %s", req.Body, req.ContentLength, req.Method)
	}
	if req.GetBody == nil {
		t.Fatal("GetBody removed")
	}
	b, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(b); string(got) != payload {
		t.Errorf("GetBody() gives %q, want %q", got, payload)
	}
	if got := srv.gotBodies(); len(got) != 3 || got[0] != payload || got[2] != payload {
		t.Errorf("server got bodies %q, want 3 × %q", got, payload)
	}
}

func TestTransportTwoLayers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		codes        []int
		wantStatus   int
		wantRequests int64
		wantOuter    int // outer attempts
	}{
		{"429,503,429,429,200", []int{429, 503, 429, 429, 200}, 200, 5, 2},
		{"ten 429s never spend an outer attempt", []int{429, 429, 429, 429, 429, 429, 429, 429, 429, 429, 200}, 200, 11, 1},
		{"503 three times", []int{503, 503, 503, 200}, 503, 3, 3},
		{"404 at once", []int{404, 200}, 404, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(tc.codes...))
			outer := 0
			tracker := tpNewTracker(t)
			inner := retries.NewTransport(tracker, retries.Throttle.Copy(tpNoWait))
			client := &http.Client{Transport: retries.NewTransport(inner,
				retries.DocV1.Copy(tpNoWait, retries.WithBefore(func(context.Context, retries.State) { outer++ })))}

			resp, err := client.Post(srv.URL+"/document/v1/ns/music/docid/1", "application/json", strings.NewReader(`{"fields":{}}`))
			if err != nil {
				t.Fatalf("Post() error = %v", err)
			}
			tpRead(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if got := srv.requests.Load(); got != tc.wantRequests {
				t.Errorf("server saw %d requests, want %d", got, tc.wantRequests)
			}
			if outer != tc.wantOuter {
				t.Errorf("%d outer attempts, want %d", outer, tc.wantOuter)
			}
			for i, b := range srv.gotBodies() {
				if b != `{"fields":{}}` {
					t.Errorf("request %d had body %q", i+1, b)
				}
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
		})
	}
}

func TestTransportErrorsLeakNothing(t *testing.T) {
	const (
		password = "s3cret-pass"
		token    = "s3cret-token"
		body     = "s3cret-body"
	)
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name    string
		addr    func(t *testing.T) string
		policy  retries.Policy
		once    bool // a body that cannot be replayed
		cancel  bool // the context is canceled before the call
		timeout time.Duration
		layers  bool // the policy around a Throttle Transport
	}{
		{name: "connection refused, last error", addr: refused, policy: retries.DocV1},
		{name: "connection refused, RetryError", addr: refused, policy: retries.Query},
		{name: "connection refused, two layers", addr: refused, policy: retries.DocV1, layers: true},
		{name: "giving up on 503, two layers", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(503)).Listener.Addr().String()
		}, policy: retries.Query.Copy(retries.WithRetry(retries.RetryIfStatus(503))), layers: true},
		{name: "giving up on 429", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2)))},
		{name: "body not replayable", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.SyncRequest, once: true},
		{name: "context canceled", addr: refused, policy: retries.DocV1, cancel: true},
		{name: "attempt timeout", addr: func(t *testing.T) string {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			return tpServe(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}).Listener.Addr().String()
		}, policy: retries.DocV1.Copy(retries.WithStop(retries.StopAfterAttempt(2))), timeout: 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rawURL := "http://admin:" + password + "@" + tc.addr(t) + "/document/v1/ns/doc/docid/1"
			wantURL := strings.Replace(rawURL, password, "xxxxx", 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			var rb io.Reader = strings.NewReader(body)
			if tc.once {
				rb = onceReader{rb}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, rb)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			var opts []retries.TransportOption
			if tc.timeout > 0 {
				opts = append(opts, retries.WithAttemptTimeout(tc.timeout))
			}
			var base http.RoundTripper = tpNewTracker(t)
			if tc.layers {
				base = retries.NewTransport(base, retries.Throttle.Copy(tpNoWait))
			}
			rt := retries.NewTransport(base, tc.policy.Copy(tpNoWait), opts...)

			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("RoundTrip() error = nil, want an error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, secret := range []string{password, token, body} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q contains %q", msg, secret)
				}
			}
			if !strings.HasPrefix(msg, "retries: POST "+wantURL+": ") {
				t.Errorf("error %q does not start with %q", msg, "retries: POST "+wantURL+": ")
			}
			if strings.Count(msg, wantURL) != 1 || strings.Contains(msg, "retries: retries:") {
				t.Errorf("error %q names the request more than once", msg)
			}
			var te *retries.TransportError
			if !errors.As(err, &te) || te.Method != http.MethodPost || te.URL != wantURL {
				t.Errorf("RoundTrip() error = %#v, want a *TransportError for POST %s", err, wantURL)
			}
			var ue *url.Error
			if !errors.As(err, &ue) || ue.Op != "Post" || ue.URL != wantURL {
				t.Errorf("errors.As(%v, *url.Error) = %#v, want Op Post and URL %s", err, ue, wantURL)
			}
			// Through an http.Client, the client's own wrapping leaks nothing either.
			req2, _ := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(body))
			req2.Header.Set("Authorization", "Bearer "+token)
			resp, err = (&http.Client{Transport: rt}).Do(req2)
			if err == nil {
				resp.Body.Close()
			} else {
				t.Log(err)
			}
			for _, secret := range []string{password, token, body} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("client error %q contains %q", err, secret)
				}
			}
		})
	}
}

func TestTransportGetBodyFails(t *testing.T) {
	srv := tpServe(t, tpStatuses(429, 200))
	errGone := errors.New("the file is gone")
	req := tpPost(t, context.Background(), srv.URL, "doc")
	getBody := req.GetBody
	calls := 0
	req.GetBody = func() (io.ReadCloser, error) {
		calls++
		if calls > 1 {
			return nil, errGone
		}
		return getBody()
	}
	tracker := tpNewTracker(t)
	resp, err := retries.NewTransport(tracker, retries.Throttle.Copy(tpNoWait)).RoundTrip(req)
	if resp != nil || !errors.Is(err, errGone) {
		t.Fatalf("RoundTrip() = %v, %v, want nil and an error matching %v", resp, err, errGone)
	}
	if !strings.Contains(err.Error(), "GetBody") {
		t.Errorf("error %q does not name GetBody", err)
	}
	if got := srv.requests.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
	if calls != 2 {
		t.Errorf("GetBody called %d times, want 2 (then given up)", calls)
	}
	if open := tracker.open.Load(); open != 0 {
		t.Errorf("%d response bodies left open, want 0", open)
	}
}

func TestTransportConcurrentUse(t *testing.T) {
	// Every odd request gets a 429, so every call is retried at least once
	// or twice, from many goroutines through one Transport.
	srv := tpServe(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n%2 == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		fmt.Fprint(w, "x")
	})
	tracker := tpNewTracker(t)
	client := &http.Client{Transport: retries.NewTransport(tracker, retries.Throttle.Copy(tpNoWait), retries.WithAttemptTimeout(time.Minute))}
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				resp, err := client.Post(srv.URL, "text/plain", strings.NewReader(fmt.Sprint(w, i)))
				if err != nil {
					t.Errorf("Post() error = %v", err)
					return
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status = %d, want 200", resp.StatusCode)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if open := tracker.open.Load(); open != 0 {
		t.Errorf("%d response bodies left open, want 0", open)
	}
	if got := srv.requests.Load(); got < workers*each {
		t.Errorf("server saw %d requests, want at least %d", got, workers*each)
	}
}

func TestNewTransportPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "retries:") {
			t.Errorf("WithAttemptTimeout(-1) panic = %v, want one starting with retries:", r)
		}
	}()
	retries.WithAttemptTimeout(-1)
}
