package retries_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// The document/v1 client of pyvespa in Go: DocV1 around Throttle, as two
// Transports. The server answers 429 twice, then 200: the inner Throttle
// layer absorbs both 429s, so the outer DocV1 layer makes a single attempt.
func ExampleNewTransport() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) <= 2 {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "stored %s", body)
	}))
	defer srv.Close()

	// A real program keeps the policies' waits; the example removes them.
	noWait := retries.WithWait(retries.WaitNone())
	inner := retries.NewTransport(nil, retries.Throttle.Copy(noWait))
	client := &http.Client{Transport: retries.NewTransport(inner, retries.DocV1.Copy(noWait))}

	resp, err := client.Post(srv.URL+"/document/v1/music/music/docid/1", "application/json",
		strings.NewReader(`{"fields":{"title":"Hey Jude"}}`))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(string(body))
	fmt.Println("requests:", requests.Load())
	// Output:
	// 200 OK
	// stored {"fields":{"title":"Hey Jude"}}
	// requests: 3
}

// A server asks for two minutes with Retry-After. The policy waits what the
// server asks, capped at max: a millisecond here, so that the example runs
// at once.
func ExampleWaitRetryAfter() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "120")
			http.Error(w, "come back later", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()

	p := retries.Throttle.Copy(
		retries.WithWait(retries.WaitRetryAfter(retries.Throttle.Wait(), time.Millisecond)),
		retries.WithBeforeSleep(func(_ context.Context, s retries.State) { fmt.Println("waiting", s.Wait) }),
	)
	client := &http.Client{Transport: retries.NewTransport(nil, p)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output:
	// waiting 1ms
	// 200 OK done
}

// Visit retries the *StatusError that CheckStatus makes of a 4xx or 5xx
// response, as pyvespa's visit retries raise_for_status: here two 500s,
// then the page.
func ExampleCheckStatus() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) <= 2 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"documents":[]}`)
	}))
	defer srv.Close()

	attempts := 0
	page, err := retries.DoValue(context.Background(), retries.Visit, func(ctx context.Context) (string, error) {
		attempts++
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/document/v1/", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		if err := retries.CheckStatus(resp); err != nil {
			return "", err // CheckStatus has closed the body
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	fmt.Println(attempts, page, err)
	// Output: 3 {"documents":[]} <nil>
}

// The first attempt stalls until the Transport gives up on it after 50 ms;
// DocV1 retries the timeout, and the second attempt is answered at once.
func ExampleWithAttemptTimeout() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then net/http watches for a hang-up
		if requests.Add(1) == 1 {
			<-r.Context().Done() // stall until the client hangs up
			return
		}
		fmt.Fprint(w, "stored")
	}))
	defer srv.Close()

	p := retries.DocV1.Copy(
		retries.WithWait(retries.WaitNone()),
		retries.WithAfter(func(_ context.Context, s retries.State) {
			fmt.Printf("attempt %d timed out: %v\n", s.Attempt, errors.Is(s.Err, retries.ErrAttemptTimeout))
		}),
	)
	client := &http.Client{Transport: retries.NewTransport(nil, p, retries.WithAttemptTimeout(50*time.Millisecond))}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"fields":{}}`))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output:
	// attempt 1 timed out: true
	// 200 OK stored
}

// The document/v1 stack with its shared objects: DocV1 around Throttle,
// the limiter and the breaker on the inner layer, the budget on the outer
// one. The server answers 429, then 503, then 200: Throttle absorbs the
// 429, DocV1 retries the 503 after asking the budget.
func ExampleLayers() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			http.Error(w, "too many requests", http.StatusTooManyRequests)
		case 2:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, "stored")
		}
	}))
	defer srv.Close()

	noWait := retries.WithWait(retries.WaitNone()) // a real program keeps the waits
	budget := retries.NewBudget(0.1, 5)
	outer, inner := retries.Layers(retries.DocV1.Copy(noWait), retries.Throttle.Copy(noWait),
		retries.NewLimiter(retries.LimiterConfig{}), retries.NewBreaker(retries.BreakerConfig{}), budget)
	client := &http.Client{Transport: retries.NewTransport(retries.NewTransport(nil, inner), outer)}

	resp, err := client.Post(srv.URL+"/document/v1/music/music/docid/1", "application/json", strings.NewReader(`{"fields":{}}`))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", requests.Load(), "requests;", budget.Stats().Retries, "retry from the budget")
	// Output: 200 after 3 requests; 1 retry from the budget
}
