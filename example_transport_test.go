package retries_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

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
