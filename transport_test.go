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
				if strings.Contains(err.Error(), srv.URL) {
					t.Errorf("RoundTrip() error %q names the request, which http.Client does", err)
				}
			}
			if open := tracker.open.Load(); open != 0 {
				t.Errorf("%d response bodies left open, want 0", open)
			}
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

func TestTransportLeavesRequestAlone(t *testing.T) {
	for _, opts := range [][]retries.TransportOption{nil, {retries.WithAttemptTimeout(time.Minute)}} {
		t.Run(fmt.Sprintf("options=%d", len(opts)), func(t *testing.T) { testTransportLeavesRequestAlone(t, opts) })
	}
}

func testTransportLeavesRequestAlone(t *testing.T, opts []retries.TransportOption) {
	const payload = "the request body"
	srv := tpServe(t, tpStatuses(429, 429, 200))
	rt := retries.NewTransport(tpNewTracker(t), retries.Throttle.Copy(tpNoWait), opts...)

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

// TestTransportFirstTry checks which request a first attempt sends: the
// caller's own, or a shallow copy when the attempt needs a context of its
// own (an attempt timeout, or hooks that find the request with
// TransportRequest); either way with the caller's body and no call of
// GetBody.
func TestTransportFirstTry(t *testing.T) {
	hook := retries.WithBefore(func(context.Context, retries.State) {})
	for _, tc := range []struct {
		name   string
		policy retries.Policy
		opts   []retries.TransportOption
		itself bool
	}{
		{"plain", retries.DocV1, nil, true},
		{"attempt_timeout", retries.DocV1, []retries.TransportOption{retries.WithAttemptTimeout(time.Minute)}, false},
		{"hook", retries.DocV1.Copy(hook), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tpServe(t, tpStatuses(200))
			req := tpPost(t, context.Background(), srv.URL, "doc")
			getBody, calls := req.GetBody, 0
			req.GetBody = func() (io.ReadCloser, error) { calls++; return getBody() }
			closed := &tpCloseCounter{ReadCloser: req.Body}
			req.Body = closed
			resp, err := retries.NewTransport(tpNewTracker(t), tc.policy, tc.opts...).RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip() error = %v", err)
			}
			if got := tpRead(t, resp); resp.StatusCode != 200 {
				t.Fatalf("response %d %q, want 200", resp.StatusCode, got)
			}
			if sent := resp.Request == req; sent != tc.itself {
				t.Errorf("the caller's request was sent itself: %v, want %v", sent, tc.itself)
			}
			if calls != 0 {
				t.Errorf("GetBody called %d times, want 0", calls)
			}
			if n := closed.closes.Load(); n < 1 {
				t.Errorf("the caller's body was closed %d times, want at least once", n)
			}
			if got := srv.gotBodies(); len(got) != 1 || got[0] != "doc" {
				t.Errorf("server got bodies %q, want [doc]", got)
			}
		})
	}
}

// tpCloseCounter counts the calls of Close on a request body.
type tpCloseCounter struct {
	io.ReadCloser
	closes atomic.Int32
}

func (c *tpCloseCounter) Close() error {
	c.closes.Add(1)
	return c.ReadCloser.Close()
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

// tpFake is a RoundTripper for tests inside a synctest bubble, where the
// network is not the point: it answers attempt n (from 1) with respond and
// records the fake time of every attempt since the fake was made.
type tpFake struct {
	start   time.Time
	calls   []time.Duration
	respond func(n int, req *http.Request) (*http.Response, error)
}

func tpNewFake(respond func(n int, req *http.Request) (*http.Response, error)) *tpFake {
	return &tpFake{start: time.Now(), respond: respond}
}

func (f *tpFake) RoundTrip(req *http.Request) (*http.Response, error) {
	f.calls = append(f.calls, time.Since(f.start))
	return f.respond(len(f.calls), req)
}

// tpResponse is a response to req with the given status and body.
func tpResponse(req *http.Request, code int, body io.ReadCloser) *http.Response {
	return &http.Response{
		StatusCode: code,
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{},
		Body:    body,
		Request: req,
	}
}

// tpStalledBody yields head and then blocks, as the body of a server that
// stalls does, until it is closed or ctx ends.
type tpStalledBody struct {
	head   *strings.Reader
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

func tpNewStalledBody(ctx context.Context, head string) *tpStalledBody {
	return &tpStalledBody{head: strings.NewReader(head), ctx: ctx, closed: make(chan struct{})}
}

func (b *tpStalledBody) Read(p []byte) (int, error) {
	if b.head.Len() > 0 {
		return b.head.Read(p)
	}
	select {
	case <-b.closed:
		return 0, errors.New("read on closed body")
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (b *tpStalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func (b *tpStalledBody) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// TestZeroTransport uses a Transport declared without NewTransport, as an
// http.Transport can be: it sends each request once through
// http.DefaultTransport.
func TestZeroTransport(t *testing.T) {
	srv := tpServe(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, "ok")
	})
	var rt retries.Transport
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: &rt}

	resp, err := client.Get(srv.URL + "/doc")
	if err != nil {
		t.Fatalf("Get() error = %v, want nil", err)
	}
	if got := tpRead(t, resp); resp.StatusCode != http.StatusOK || got != "ok" {
		t.Errorf("Get() = %s %q, want 200 OK and ok", resp.Status, got)
	}
	resp, err = client.Get(srv.URL + "/busy")
	if err != nil {
		t.Fatalf("Get() error = %v, want nil", err)
	}
	tpRead(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", resp.StatusCode)
	}
	if got := srv.requests.Load(); got != 2 {
		t.Errorf("server saw %d requests, want 2", got)
	}

	srv.Close()
	_, err = client.Get(srv.URL + "/doc")
	var re *retries.RetryError
	if !errors.As(err, &re) || re.Attempts != 1 || !retries.IsConnectionError(err) {
		t.Errorf("Get() from a closed server error = %v, want a connection error after 1 attempt", err)
	}
}

// TestTransportAttempt checks the attempt number a base RoundTripper sees:
// 1, 2, 3 for a request retried twice; with two layers, the inner layer's
// count where it retried, and the outer one's on the inner's first attempt.
func TestTransportAttempt(t *testing.T) {
	srv := tpServe(t, tpStatuses(429, 503, 200))
	var seen []int
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		seen = append(seen, retries.TransportAttempt(req.Context()))
		return http.DefaultTransport.RoundTrip(req)
	})
	inner := retries.NewTransport(base, retries.Throttle.Copy(tpNoWait))
	outer := retries.NewTransport(inner, retries.DocV1.Copy(tpNoWait))
	resp, err := outer.RoundTrip(tpPost(t, context.Background(), srv.URL, "doc"))
	if err != nil {
		t.Fatal(err)
	}
	tpRead(t, resp)
	// 429: the inner layer retries (its attempt 2); 503: the outer layer
	// retries, and the inner layer's first attempt carries the outer's 2.
	if want := []int{1, 2, 2}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("attempts seen %v, want %v", seen, want)
	}
	if got := retries.TransportAttempt(context.Background()); got != 1 {
		t.Errorf("TransportAttempt(Background) = %d, want 1", got)
	}
}
