package retries_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// BenchmarkTransport sends a 512-byte POST that succeeds at once to a
// loopback server: through a plain http.Transport, through one retrying
// layer (DocV1), and through two (DocV1 around Throttle, as pyvespa's
// document/v1 client nests them). The allocations per request are the
// figure to read: a layer's first try should add almost none.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"id":"id:music:music::1"}`)
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), 512)
	for _, c := range []struct {
		name string
		rt   func(http.RoundTripper) http.RoundTripper
	}{
		{"plain", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"one_layer", func(base http.RoundTripper) http.RoundTripper {
			return retries.NewTransport(base, retries.DocV1)
		}},
		{"two_layers", func(base http.RoundTripper) http.RoundTripper {
			return retries.NewTransport(retries.NewTransport(base, retries.Throttle), retries.DocV1)
		}},
	} {
		b.Run("layers="+c.name, func(b *testing.B) {
			base := &http.Transport{MaxIdleConnsPerHost: 4}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: c.rt(base)}
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// staticRT answers every request with the same 200 response, allocating
// nothing, so that what a Transport allocates can be counted alone.
type staticRT struct{ resp *http.Response }

func (s staticRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return s.resp, nil
}

// TestTransportFirstTryAllocations pins what a retrying layer allocates for
// a first-try success: nothing, with one layer or two, when the request
// can go as it is (no attempt timeout, no hooks); with an attempt timeout,
// what its own context, its timer and the request's shallow copy need.
func TestTransportFirstTryAllocations(t *testing.T) {
	base := staticRT{&http.Response{StatusCode: http.StatusOK, Body: http.NoBody}}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/document/v1/", bytes.NewReader(make([]byte, 512)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
		want float64
	}{
		{"one_layer", retries.NewTransport(base, retries.DocV1), 0},
		{"two_layers", retries.NewTransport(retries.NewTransport(base, retries.Throttle), retries.DocV1), 0},
		{"attempt_timeout", retries.NewTransport(base, retries.Throttle, retries.WithAttemptTimeout(time.Minute)), 6},
	} {
		got := testing.AllocsPerRun(1000, func() {
			resp, err := c.rt.RoundTrip(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("RoundTrip() = %v, %v", resp, err)
			}
			_ = resp.Body.Close()
		})
		if got > c.want {
			t.Errorf("%s: %v allocations per first-try request, want at most %v", c.name, got, c.want)
		}
	}
}
