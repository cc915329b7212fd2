package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
)

// TestCheckStatus runs CheckStatus on responses from a real server.
func TestCheckStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		_, _ = fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/"), &code)
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, strings.Repeat("e", 5000))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("alice", "s3cret")

	for _, code := range []int{200, 204, 302, 399} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+fmt.Sprintf("/%d", code), nil)
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := retries.CheckStatus(resp); err != nil {
			t.Errorf("CheckStatus(%d) = %v, want nil", code, err)
		}
		resp.Body.Close()
	}
	if err := retries.CheckStatus(nil); err != nil {
		t.Errorf("CheckStatus(nil) = %v, want nil", err)
	}

	req, _ := http.NewRequest(http.MethodPost, u.String()+"/503?q=1", strings.NewReader("payload"))
	req.Header.Set("Authorization", "Bearer token-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	err = retries.CheckStatus(resp)
	var se *retries.StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || se.Header.Get("Retry-After") != "7" || len(se.Body) != 4096 {
		t.Fatalf("CheckStatus(503) = %#v, want a StatusError 503 with the header and 4 KiB of body", err)
	}
	want := "retries: POST " + strings.Replace(srv.URL, "http://", "http://alice:xxxxx@", 1) + "/503?q=1: 503 Service Unavailable"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	for _, secret := range []string{"s3cret", "token-123", "payload"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Error() = %q leaks %q", err.Error(), secret)
		}
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("CheckStatus left the body open")
	}
	if !retries.RetryIfStatus(503).Match(nil, err) || retries.IsConnectionError(err) {
		t.Error("a 503 StatusError should match RetryIfStatus(503) and not be a connection error")
	}
}

func TestStatusErrorMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    retries.StatusError
		want string
	}{
		{retries.StatusError{StatusCode: 429}, "retries: HTTP status 429"},
		{retries.StatusError{StatusCode: 500, Status: "500 Internal Server Error", URL: "http://h/x"}, "retries: http://h/x: 500 Internal Server Error"},
		{retries.StatusError{StatusCode: 404, Status: "404 Not Found", Method: "GET", URL: "http://h/"}, "retries: GET http://h/: 404 Not Found"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestCheckStatusStalledBody checks that CheckStatus gives up on a body that
// stalls after 100 ms, keeps what it read and closes the body.
func TestCheckStatusStalledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		body := tpNewStalledBody(ctx, "partial")
		req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		start := time.Now()
		err := retries.CheckStatus(tpResponse(req, http.StatusServiceUnavailable, body))
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("CheckStatus() returned after %v, want 100ms", got)
		}
		var se *retries.StatusError
		if !errors.As(err, &se) || se.StatusCode != 503 || string(se.Body) != "partial" {
			t.Errorf("CheckStatus() = %#v, want a 503 StatusError with Body partial", err)
		}
		if !body.isClosed() {
			t.Error("CheckStatus left the stalled body open")
		}
	})
}
