package visit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The servers here are written from Vespa's handler (DocumentV1ApiHandler
// and StreamingJsonLinesResponse), not from visittest, so that they do not
// share the client's assumptions: each answers one slice's requests by
// the continuation token they carry, and fails in one of the ways a real
// server, or something in front of it, does.

// docLines writes documents from..to-1 as the feed lines of a stream.
func docLines(w *bytes.Buffer, from, to int) {
	for n := from; n < to; n++ {
		fmt.Fprintf(w, `{"put":"id:music:music::%d","fields":{"n":%d}}`+"\n", n, n)
	}
}

// docPage returns a page of documents from..to-1 with the keys given.
func docPage(from, to int, keys map[string]any) []byte {
	var docs []map[string]any
	for n := from; n < to; n++ {
		docs = append(docs, map[string]any{"id": fmt.Sprintf("id:music:music::%d", n), "fields": map[string]int{"n": n}})
	}
	page := map[string]any{"pathId": "/document/v1/", "documents": docs, "documentCount": len(docs)}
	for k, v := range keys {
		page[k] = v
	}
	data, _ := json.Marshal(page)
	return data
}

// serve starts a server of handler, closed when the test ends.
func serve(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// visitAll visits srv's one slice with cfg's other fields, and returns
// the documents handed out by number and Visit's error.
func visitAll(t *testing.T, cfg Config) (map[int]int, Progress, error) {
	t.Helper()
	cfg.Cluster, cfg.Slices = "music", 1
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, c, Progress{}, 0)
}

// TestStreamErrorMessageFailsTheSlice: a stream that writes an error
// message, then the epilogue's continuation without a token (a failed
// session whose progress reads finished) and its stats, does not end the
// slice: it is asked again from its last token, and every document is
// handed out once. The slice used to be taken as done, 140 of 200 lost.
func TestStreamErrorMessageFailsTheSlice(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		switch r.URL.Query().Get("continuation") {
		case "":
			docLines(&b, 0, 50)
			b.WriteString(`{"continuation":{"token":"b1","percentFinished":25}}` + "\n")
			if !failed.Swap(true) {
				docLines(&b, 50, 60)
				b.WriteString(`{"message":{"text":"Visitor aborted: node 3 went down","severity":"error"}}` + "\n")
				b.WriteString(`{"continuation":{"percentFinished":100}}` + "\n")
				b.WriteString(`{"sessionStats":{"documentCount":60}}` + "\n")
				break
			}
			b.WriteString(`{"sessionStats":{"documentCount":50}}` + "\n")
		case "b1":
			docLines(&b, 50, 200)
			b.WriteString(`{"continuation":{"percentFinished":100}}` + "\n")
			b.WriteString(`{"sessionStats":{"documentCount":150}}` + "\n")
		}
		w.Header().Set("Content-Type", "application/jsonl")
		_, _ = w.Write(b.Bytes())
	})
	got, p, err := visitAll(t, Config{URL: srv.URL, MaxOutage: time.Minute})
	if err != nil || !p.Complete() {
		t.Fatalf("Visit() = %+v, %v; want it complete", p, err)
	}
	checkOnce(t, got, 200)
}

// TestPageMessageFailsTheSlice: a 200 page with a message and no
// continuation (an older Vespa's answer to a session that failed before
// its first bucket) does not end the slice: it is asked again, and every
// document is handed out once. It used to end the slice, 150 of 200 lost.
func TestPageMessageFailsTheSlice(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("continuation") {
		case "":
			if !failed.Swap(true) {
				_, _ = w.Write(docPage(0, 50, map[string]any{"message": "Visiting failed: no distributor"}))
				return
			}
			_, _ = w.Write(docPage(0, 100, map[string]any{"continuation": "p1"}))
		case "p1":
			_, _ = w.Write(docPage(100, 200, nil))
		}
	})
	got, p, err := visitAll(t, Config{URL: srv.URL, Pages: true, MaxOutage: time.Minute})
	if err != nil || !p.Complete() {
		t.Fatalf("Visit() = %+v, %v; want it complete", p, err)
	}
	checkOnce(t, got, 200)
}

// TestMaxOutageBoundsEveryFailure: servers that fail fast in ways that
// are no error of HTTP (an error message on every stream, a 200 that is
// HTML, something that is not HTTP, the same token for ever, the same
// page for ever, a 429 to every request, a delete's same token for ever
// with a count of documents processed) end the visit with ErrMaxOutage,
// in a bounded number of requests. They used to be asked for ever,
// hundreds of thousands of times: each request admitted, each repeated
// token, each 429 (a turn to wait for) and each count processed counted
// as progress.
func TestMaxOutageBoundsEveryFailure(t *testing.T) {
	t.Parallel()
	notHTTP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notHTTP.Close() })
	var garbage atomic.Int64
	go func() {
		for {
			conn, err := notHTTP.Accept()
			if err != nil {
				return
			}
			garbage.Add(1)
			_, _ = conn.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
			conn.Close()
		}
	}()
	cases := map[string]struct {
		pages   bool
		handler http.HandlerFunc
	}{
		"an error message on every stream": {false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/jsonl")
			_, _ = w.Write([]byte(`{"message":{"text":"Visitor aborted","severity":"error"}}` + "\n" +
				`{"continuation":{"percentFinished":100}}` + "\n" + `{"sessionStats":{"documentCount":0}}` + "\n"))
		}},
		"a 200 of HTML": {false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>Welcome to nginx!</body></html>"))
		}},
		"the same token for ever, on streams": {false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/jsonl")
			_, _ = w.Write([]byte(`{"continuation":{"token":"same","percentFinished":1}}` + "\n" + `{"sessionStats":{"documentCount":0}}` + "\n"))
		}},
		"the same page for ever": {true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(docPage(0, 10, map[string]any{"continuation": "same"}))
		}},
		"not HTTP": {false, nil},
		"a 429 to every request": {false, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"Rejecting execution due to overload: 12 requests already enqueued"}`))
		}},
		"the same token for ever, counting documents processed": {true, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"pathId":"/document/v1/","documentCount":50,"continuation":"same"}`))
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int64
			u := "http://" + notHTTP.Addr().String()
			if tc.handler != nil {
				u = serve(t, func(w http.ResponseWriter, r *http.Request) { requests.Add(1); tc.handler(w, r) }).URL
			}
			var log syncLog
			start := time.Now()
			// A -max-outage of three times the log's quiet time: at 0.5 s
			// (the same as the quiet time) a loaded machine could end the
			// visit before a failure came past it to be logged (CI saw it).
			cfg := Config{URL: u, Pages: tc.pages, MaxOutage: 3 * logQuiet, Log: &log}
			if strings.Contains(name, "processed") {
				cfg.Selection, cfg.Process = "true", &Process{}
			}
			_, p, err := visitAll(t, cfg)
			took := time.Since(start)
			if !errors.Is(err, ErrMaxOutage) || p.Complete() {
				t.Fatalf("Visit() = %+v, %v after %v; want ErrMaxOutage", p, err, took)
			}
			if n := requests.Load() + garbage.Load(); tc.handler != nil && n > 50 {
				t.Errorf("%d requests in %v: the failures were not paced", n, took)
			}
			if lines := log.String(); strings.Count(lines, "retries visit: failing: ") != 1 {
				t.Errorf("the log, want one line saying it fails:\n%s", lines)
			}
			if len(err.Error()) > 300 {
				t.Errorf("the error is %d characters long: %v", len(err.Error()), err)
			}
		})
	}
}

// syncLog is a log safe for the visit's goroutines and the test.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDeadEndpointSaidAtOnce: against a port where nothing listens, the
// log says so at the first failure (the cause, and how long the visit
// waits), and the error names the cause once: it used to print nothing
// until -max-outage, and then the cause among 300 characters said three
// times.
func TestDeadEndpointSaidAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var log syncLog
	first := make(chan time.Time, 1)
	_, _, err = visitAll(t, Config{URL: dead, MaxOutage: 700 * time.Millisecond, Log: logFunc(func(p []byte) {
		select {
		case first <- time.Now():
		default:
		}
		_, _ = log.Write(p)
	})})
	if !errors.Is(err, ErrMaxOutage) || strings.Count(err.Error(), "connection refused") != 1 {
		t.Errorf("Visit() = %v; want ErrMaxOutage naming the refusal once", err)
	}
	want := "retries visit: failing: dial tcp " + strings.TrimPrefix(dead, "http://") + ": connect: connection refused; each slice asks again from where it stands, for up to 700ms (-max-outage)\n"
	if log.String() != want {
		t.Errorf("the log:\n%q\nwant\n%q", log.String(), want)
	}
}

type logFunc func([]byte)

func (f logFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// TestSourceSecretsRedacted: a server that quotes the credentials sent
// back, as sent, URL-encoded, base64-encoded or JSON-escaped, in a refusal
// (400), a stream's error message or a page's message, has none of them
// printed: not in the error, the log or Stats. The source side used to
// print them all, where the feed redacted them.
func TestSourceSecretsRedacted(t *testing.T) {
	t.Parallel()
	token := "s3cr3t-t0ken/with+chars=="
	header := http.Header{"Authorization": {"Bearer " + token}}
	escaped, _ := json.Marshal(token)
	forms := []string{token, url.QueryEscape(token), base64.StdEncoding.EncodeToString([]byte(token)), strings.Trim(string(escaped), `"`)}
	echo := func(r *http.Request) string {
		auth := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		e, _ := json.Marshal(auth)
		return fmt.Sprintf("bad token %s (%s, %s, %s)", auth, url.QueryEscape(auth), base64.StdEncoding.EncodeToString([]byte(auth)), strings.Trim(string(e), `"`))
	}
	for name, tc := range map[string]struct {
		pages   bool
		handler http.HandlerFunc
	}{
		"a 400": {false, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(echo(r))) // not JSON: quoted whole
		}},
		"a stream's message": {false, func(w http.ResponseWriter, r *http.Request) {
			msg, _ := json.Marshal(map[string]any{"message": map[string]string{"text": echo(r), "severity": "error"}})
			w.Header().Set("Content-Type", "application/jsonl")
			_, _ = w.Write(append(msg, []byte("\n"+`{"sessionStats":{"documentCount":0}}`+"\n")...))
		}},
		"a page's message": {true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(docPage(0, 0, map[string]any{"message": echo(r)}))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tc.handler)
			var log syncLog
			c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 1, Pages: tc.pages, Header: header,
				MaxOutage: 300 * time.Millisecond, Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			var failing string
			_, err = c.Visit(t.Context(), Progress{}, func(Page) error { return nil })
			failing = c.Stats().Failing
			if err == nil {
				t.Fatal("Visit() = nil, want an error")
			}
			for _, form := range forms {
				for what, s := range map[string]string{"the error": err.Error(), "the log": log.String(), "Stats.Failing": failing} {
					if strings.Contains(s, form) {
						t.Errorf("%s holds %q: %s", what, form, s)
					}
				}
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("the error %q says nothing was redacted", err)
			}
		})
	}
}

// TestNotAVisitPage: a 200 whose JSON is of another shape (a query
// container's result, at a -url that is not document/v1's) fails the
// visit, or the delete, at once with a *StatusError of status 200 that
// says so: read as a page with no continuation, it ended each slice as
// done, and the visit, or the delete, reported success having done
// nothing.
func TestNotAVisitPage(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"coverage":{"full":true}}}`))
	})
	for _, proc := range []*Process{nil, {}} {
		cfg := Config{URL: srv.URL, Pages: true}
		if proc != nil {
			cfg.Selection, cfg.Process = "true", proc
		}
		docs, p, err := visitAll(t, cfg)
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusOK || !strings.Contains(se.Message, "not a document/v1 visit page") || p.Complete() || len(docs) != 0 {
			t.Errorf("process %v: Visit() = %+v, %v; want a StatusError of 200 saying it is no visit page", proc != nil, p, err)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want one a visit", n)
	}
}
