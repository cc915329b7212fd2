package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestLeaseStopsAStalledWrite: a process stopped after Fence let a request
// go and woken after its lease ran out (here, Fence lets each operation's
// first request go and ends the lease as it returns) does not write that
// request: the server never receives it, the operation passes Fence
// again (which renews the lease, as a Kafka member's commit does) and is
// applied once. A request refused before anything was written to its
// connection cannot have been applied, so an update not safe to repeat is
// sent again rather than reported as of unknown outcome; with HTTP/2, whose
// connections carry several requests, only safe operations are fed.
func TestLeaseStopsAStalledWrite(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"http/1.1", "h2c", "tls"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			var leaseOut atomic.Bool
			var early atomic.Int64 // requests the server received while the lease was out
			count := func(*http.Request) {
				if leaseOut.Load() {
					early.Add(1)
				}
			}
			cfg := testFeedConfig("", nil)
			cfg.Concurrency = 1
			var requests func(method, path string) int
			switch proto {
			case "http/1.1":
				srv := feedtest.New(t, func(r *http.Request, _ int) int { count(r); return 0 })
				cfg.URL, requests = srv.URL, srv.Requests
			case "h2c":
				srv := feedtest.NewH2C(t)
				cfg.URL, cfg.HTTP2, requests = srv.URL, true, srv.Requests
			case "tls":
				var mu sync.Mutex
				seen := map[string]int{}
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					count(r)
					mu.Lock()
					seen[r.Method+" "+r.URL.Path]++
					mu.Unlock()
					fmt.Fprintf(w, `{"id":%q}`, r.URL.Path)
				}))
				srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the lease refused
				srv.StartTLS()
				t.Cleanup(srv.Close)
				cfg.URL, cfg.TLS = srv.URL, srv.Client().Transport.(*http.Transport).TLSClientConfig
				requests = func(method, path string) int {
					mu.Lock()
					defer mu.Unlock()
					return seen[method+" "+path]
				}
			}
			var mu sync.Mutex
			fenced := map[string]int{}
			cfg.Fence = fenceFuncs{
				admit: func(_ context.Context, o Operation) error {
					mu.Lock()
					defer mu.Unlock()
					fenced[o.ID]++
					// The first time, the process stops as Admit returns
					// and wakes with its lease run out; later, the lease is
					// renewed.
					leaseOut.Store(fenced[o.ID] == 1)
					return nil
				},
				until: func() time.Time {
					if leaseOut.Load() {
						return time.Now().Add(-time.Second)
					}
					return time.Now().Add(time.Minute)
				},
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{"p1", "u1", "p2", "u2", "r1"}
			input := `{"put":"id:a:b::p1","fields":{}}
{"update":"id:a:b::u1","fields":{"n":{"increment":1}}}
{"put":"id:a:b::p2","fields":{}}
{"update":"id:a:b::u2","fields":{"n":{"increment":1}}}
{"remove":"id:a:b::r1"}
`
			if proto == "h2c" {
				ids = []string{"p1", "p2", "r1"}
				input = "{\"put\":\"id:a:b::p1\",\"fields\":{}}\n{\"put\":\"id:a:b::p2\",\"fields\":{}}\n{\"remove\":\"id:a:b::r1\"}\n"
			}
			errs := map[string]error{}
			_ = c.Feed(t.Context(), Read(strings.NewReader(input)), func(o Operation, _ Result, err error) {
				mu.Lock()
				defer mu.Unlock()
				errs[o.ID] = err
			})
			if n := early.Load(); n != 0 {
				t.Errorf("the server received %d requests written after the lease ran out", n)
			}
			for _, id := range ids {
				method := map[byte]string{'p': "POST", 'u': "PUT", 'r': "DELETE"}[id[0]]
				full := "id:a:b::" + id
				if n := requests(method, "/document/v1/a/b/docid/"+id); errs[full] != nil || n != 1 || fenced[full] != 2 {
					t.Errorf("%s ended with %v, sent %d times, passed Fence %d times; want acknowledged, sent once, Fence passed twice", id, errs[full], n, fenced[full])
				}
			}
		})
	}
}

// TestLeaseRefusalSeenByReads: once a leased connection has refused a
// write, a read that fails (the connection closed by net/http after the
// failed write, whose reading goroutine can answer the request first)
// fails with the refusal, which alone says whether anything was written.
func TestLeaseRefusalSeenByReads(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	for _, tc := range []struct {
		name       string
		writeFirst bool // a write went out before the lease ran out
	}{{"fresh", false}, {"used", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var out atomic.Bool
			dial := leaseDial((&net.Dialer{}).DialContext, func() time.Time {
				if out.Load() {
					return time.Now().Add(-time.Second)
				}
				return time.Now().Add(time.Minute)
			})
			conn, err := dial(t.Context(), "tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if tc.writeFirst {
				if _, err := conn.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
					t.Fatal(err)
				}
			}
			read := make(chan error, 1)
			go func() { _, err := conn.Read(make([]byte, 1)); read <- err }()
			out.Store(true)
			_, werr := conn.Write([]byte("PUT / HTTP/1.1\r\n"))
			conn.Close()
			rerr := <-read
			for what, err := range map[string]error{"write": werr, "read": rerr} {
				var le *leaseError
				if !errors.As(err, &le) || le.fresh == tc.writeFirst {
					t.Errorf("%s failed with %v; want the lease's refusal, fresh %v", what, err, !tc.writeFirst)
				}
			}
		})
	}
}

// fenceFuncs is a Fence of functions; a nil life means every operation
// may always be written.
type fenceFuncs struct {
	admit func(context.Context, Operation) error
	until func() time.Time
	life  func(Operation) context.Context
}

func (f fenceFuncs) Admit(ctx context.Context, o Operation) error { return f.admit(ctx, o) }
func (f fenceFuncs) Until() time.Time                             { return f.until() }
func (f fenceFuncs) Lifetime(o Operation) context.Context {
	if f.life == nil {
		return nil
	}
	return f.life(o)
}
