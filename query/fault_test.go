package query

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRoutesAroundWhatDoesNotAnswer, in fake time: of three containers,
// one accepts every request and never answers, one answers a 200 that is
// an HTML page (a proxy's maintenance page), and one answers results.
// Queries with a 200 ms deadline, one every 10 ms: both failing
// containers count against their breakers, which open, and the queries
// go to the third: of the last 200 of 400, at most the breakers' probes
// fail. Before, a timeout and a non-result were neutral to the breaker,
// and a third of the queries failed to the end.
func TestRoutesAroundWhatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"never answers", "a 200 of HTML"} {
		t.Run(fault, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := New(Config{URLs: []string{"http://bad", "http://good1", "http://good2"},
					Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
						ok := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(okBody))}
						if r.URL.Host != "bad" {
							time.Sleep(2 * time.Millisecond)
							return ok, nil
						}
						if fault == "never answers" {
							<-r.Context().Done()
							return nil, r.Context().Err()
						}
						ok.Header.Set("Content-Type", "text/html")
						ok.Body = io.NopCloser(strings.NewReader("<html><body>Down for maintenance</body></html>"))
						return ok, nil
					})})
				if err != nil {
					t.Fatal(err)
				}
				failedFirst, failedLast := 0, 0
				for i := range 400 {
					ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
					_, err := c.Search(ctx, Query{Params: url.Values{"yql": {"select * from music where true"}}})
					cancel()
					switch {
					case err != nil && i < 200:
						failedFirst++
					case err != nil:
						failedLast++
					}
					time.Sleep(10 * time.Millisecond)
				}
				if failedLast > 10 {
					t.Errorf("%d of the last 200 queries failed (%d of the first 200): want at most the probes", failedLast, failedFirst)
				}
				st := c.Stats()
				if st.Endpoints[0].Breaker.Opened == 0 {
					t.Errorf("the failing container's breaker never opened: %+v", st.Endpoints[0])
				}
				t.Logf("failed: %d of the first 200, %d of the last 200; %+v", failedFirst, failedLast, st.Endpoints[0].Breaker)
			})
		})
	}
}

// TestAnswerTooLarge: a body past the 64 MiB the Client reads is said
// to be too large (ErrTooLarge), not a JSON error at its cut.
func TestAnswerTooLarge(t *testing.T) {
	t.Parallel()
	big := strings.Repeat(" ", maxBody) + okBody
	c, err := New(Config{URLs: []string{"http://a"}, Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(big))}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // time to read 64 MiB under -race
	defer cancel()
	if _, err := c.Search(ctx, Query{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Search() = %v, want ErrTooLarge", err)
	}
}
