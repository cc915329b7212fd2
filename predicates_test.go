package retries_test

import (
	"context"
	"fmt"
	"net/http"
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
