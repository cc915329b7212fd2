package query

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestRequestTimeoutsAgree: a request says one timeout, the least of what
// is left of the deadline and the query's own, in its URL and its body
// alike (a POSTed body's own shorter timeout was contradicted by a larger
// one in the URL); a RawQuery goes as written, its own timeout taken out
// and counted, and only white space escaped.
func TestRequestTimeoutsAgree(t *testing.T) {
	t.Parallel()
	c := &Client{}
	for _, tc := range []struct {
		q        Query
		left     time.Duration
		rawQuery string
		body     string
	}{
		{Query{Body: []byte(`{"yql":"select * from a where true","timeout":"50ms"}`)}, 2 * time.Second,
			"timeout=50ms", `{"yql":"select * from a where true","timeout":"50ms"}`},
		{Query{Body: []byte(`{"yql":"y","timeout":5}`)}, time.Second, "timeout=1000ms", `{"timeout":"1000ms","yql":"y"}`},
		{Query{RawQuery: "yql=a;b&timeout=0.1&x=%zz"}, time.Second, "yql=a;b&x=%zz&timeout=100ms", ""},
		{Query{RawQuery: "yql=a b&timeout=9"}, time.Second, "yql=a%20b&timeout=1000ms", ""},
		{Query{RawQuery: "yql=a;b"}, 0, "yql=a;b", ""},
	} {
		req, err := c.request(context.Background(), "http://h", tc.q, tc.left)
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
		}
		if req.URL.RawQuery != tc.rawQuery || string(body) != tc.body {
			t.Errorf("%+v, %v left: sent ?%s and %s; want ?%s and %s", tc.q, tc.left, req.URL.RawQuery, body, tc.rawQuery, tc.body)
		}
	}
	if got := queryTimeout(Query{RawQuery: "a=1&timeout=250ms"}); got != 250*time.Millisecond {
		t.Errorf("queryTimeout of a RawQuery = %v, want 250ms", got)
	}
}
