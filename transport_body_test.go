package retries_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seed32e55400/retries"
)

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
