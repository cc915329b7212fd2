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

	"github.com/seed32e55400/retries"
)

// vespaResponse mimics pyvespa's VespaResponse: a status behind a method.
type vespaResponse struct{ code int }

func (r *vespaResponse) StatusCode() int { return r.code }

type codeErr struct{ code int }

func (e codeErr) Error() string { return fmt.Sprintf("code %d", e.code) }

func TestPredicates(t *testing.T) {
	t.Parallel()
	isOne := func(v any) bool { return v == 1 }
	var nilResp *http.Response
	var nilVespa *vespaResponse
	statusErr := &retries.StatusError{StatusCode: 429}
	type outcome struct {
		v   any
		err error
	}
	for _, tc := range []struct {
		name string
		p    retries.Predicate
		in   []outcome
		want []bool
	}{
		{"zero_is_any_error", retries.Predicate{}, []outcome{{nil, errBoom}, {1, nil}}, []bool{true, false}},
		{"any_error", retries.RetryIfAnyError(), []outcome{{nil, errBoom}, {nil, nil}}, []bool{true, false}},
		{"error_func", retries.RetryIfError(func(err error) bool { return err == errBoom }),
			[]outcome{{nil, errBoom}, {nil, errOther}, {nil, nil}}, []bool{true, false, false}},
		{"error_is", retries.RetryIfErrorIs(errBoom, context.DeadlineExceeded),
			[]outcome{{nil, fmt.Errorf("x: %w", errBoom)}, {nil, context.DeadlineExceeded}, {nil, errOther}, {nil, nil}},
			[]bool{true, true, false, false}},
		{"error_as", retries.RetryIfErrorAs[codeErr](),
			[]outcome{{nil, fmt.Errorf("x: %w", codeErr{1})}, {nil, errBoom}, {nil, nil}}, []bool{true, false, false}},
		// tenacity test_retry_if_result
		{"if_value", retries.RetryIfValue(isOne), []outcome{{1, nil}, {2, nil}, {1, errBoom}}, []bool{true, false, false}},
		// tenacity test_retry_if_not_result
		{"not_value", retries.RetryNot(retries.RetryIfValue(isOne)), []outcome{{1, nil}, {2, nil}}, []bool{false, true}},
		// tenacity test_retry_any
		{"any", retries.RetryAny(retries.RetryIfValue(isOne), retries.RetryIfValue(func(v any) bool { return v == 2 })),
			[]outcome{{1, nil}, {2, nil}, {3, nil}, {nil, errBoom}}, []bool{true, true, false, false}},
		// tenacity test_retry_all
		{"all", retries.RetryAll(retries.RetryIfValue(isOne), retries.RetryIfValue(func(v any) bool { _, ok := v.(int); return ok })),
			[]outcome{{1, nil}, {2, nil}, {3, nil}, {nil, errBoom}}, []bool{true, false, false, false}},
		{"any_empty_never", retries.RetryAny(), []outcome{{nil, errBoom}, {1, nil}}, []bool{false, false}},
		{"all_empty_always", retries.RetryAll(), []outcome{{nil, errBoom}, {1, nil}}, []bool{true, true}},
		// pyvespa test_retry_if_status_on_vespa_response and …_on_httpr_response
		{"status", retries.RetryIfStatus(429, 503), []outcome{
			{&vespaResponse{429}, nil}, {&vespaResponse{503}, nil}, {&vespaResponse{200}, nil},
			{&http.Response{StatusCode: 429}, nil}, {&http.Response{StatusCode: 200}, nil},
			{struct{}{}, nil}, {nil, nil}, {nilResp, nil}, {nilVespa, nil},
			{nil, fmt.Errorf("visit: %w", statusErr)}, {nil, errBoom}, {429, nil},
		}, []bool{true, true, false, true, false, false, false, false, false, true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, o := range tc.in {
				if got := tc.p.Match(o.v, o.err); got != tc.want[i] {
					t.Errorf("Match(%v, %v) = %v, want %v", o.v, o.err, got, tc.want[i])
				}
			}
		})
	}
}

func TestPredicateString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    retries.Predicate
		want string
	}{
		{retries.RetryIfErrorIs(errBoom), `RetryIfErrorIs("boom")`},
		{retries.RetryIfErrorAs[codeErr](), "RetryIfErrorAs[retries_test.codeErr]()"},
		{retries.RetryNot(retries.RetryIfStatus(200, 204)), "RetryNot(RetryIfStatus(200, 204))"},
		{retries.RetryAll(), "RetryAll()"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

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
