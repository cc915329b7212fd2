package feed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkFeed feeds 2000 puts to a loopback document/v1 server that
// acknowledges each at once, over HTTP/1.1 and HTTP/2 without TLS, with the
// command's layers and the limiter. It reports the feeder's cost per
// document (the server's share included, as both run in this process):
// profile it with -cpuprofile or -memprofile to see where it goes.
func BenchmarkFeed(b *testing.B) {
	const docs = 2000
	var in strings.Builder
	for i := range docs {
		fmt.Fprintf(&in, `{"put": "id:music:music::%d", "fields": {"title": "Song %d", "artist": "Artist %d", "year": %d}}`+"\n", i, i, i%97, 1950+i%70)
	}
	input := in.String()
	ack := []byte(`{"pathId":"/document/v1/music/music/docid/1","id":"id:music:music::1"}`)
	for _, h2 := range []bool{false, true} {
		b.Run(fmt.Sprintf("http2=%v", h2), func(b *testing.B) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(ack)
			}))
			if h2 {
				var p http.Protocols
				p.SetUnencryptedHTTP2(true)
				srv.Config.Protocols = &p
			}
			srv.Start()
			defer srv.Close()
			cfg := testFeedConfig(srv.URL, io.Discard)
			cfg.HTTP2 = h2
			b.ReportAllocs()
			for b.Loop() {
				f, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if res := feedReport(f, context.Background(), strings.NewReader(input)); !res.Complete() {
					b.Fatalf("feed incomplete:\n%s", res.Summary())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*docs), "ns/doc")
		})
	}
}
