package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// BenchmarkClient sends 2000 puts to a loopback server that acknowledges
// each at once, over HTTP/1.1, with the command's defaults: by Send from
// 64 goroutines, and by one Feed of the same documents. It reports the
// cost per document (the server's share included).
func BenchmarkClient(b *testing.B) {
	const docs, goroutines = 2000, 64
	ops := make([]Operation, docs)
	for i := range ops {
		ops[i] = Operation{Kind: Put, ID: fmt.Sprintf("id:music:music::%d", i),
			Fields: json.RawMessage(fmt.Sprintf(`{"title": "Song %d", "artist": "Artist %d", "year": %d}`, i, i%97, 1950+i%70))}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pathId":"/document/v1/music/music/docid/1"}`))
	}))
	defer srv.Close()
	b.Run("Send64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := New(Config{URL: srv.URL})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := g; i < docs; i += goroutines {
						if _, err := c.Send(context.Background(), ops[i]); err != nil {
							b.Error(err)
						}
					}
				})
			}
			wg.Wait()
			_ = c.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*docs), "ns/doc")
	})
	b.Run("Feed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := New(Config{URL: srv.URL})
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Feed(context.Background(), func(yield func(Operation, error) bool) {
				for _, o := range ops {
					if !yield(o, nil) {
						return
					}
				}
			}, nil); err != nil {
				b.Fatal(err)
			}
			_ = c.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*docs), "ns/doc")
	})
}
