// Package visittest provides a Vespa document/v1 server that serves visits
// on a loopback port, for tests of code that reads a corpus out of Vespa,
// as feed/feedtest does for feeding: it holds a corpus in buckets, splits
// it into slices, pages through it with continuation tokens bound to the
// slicing, and fails as told.
package visittest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reset is the fault that makes the Server reset the connection.
const Reset = -1

// CutAfter returns the fault that makes the Server write the first n
// lines of a stream (n bytes of a page) and then cut the connection.
func CutAfter(n int) int { return cutBase - n }

const cutBase = -1000

// FailAfterPart returns the fault that makes a request that deletes or
// updates by selection process part of its chunk (half its buckets, or
// none for a 504) and then answer status with a message and no
// continuation, as Vespa's handler does when a visit fails under it.
func FailAfterPart(status int) int { return partBase - status }

const partBase = -2000

// Server is a document/v1 endpoint that serves visits of its corpus, and
// deletes and updates by selection (see process.go, which says the
// selections it reads): documents id:music:music::N (N from 0) with the
// fields {"n": N}, in Buckets buckets (document N in bucket N mod Buckets), of the content
// cluster Cluster. A page holds whole buckets, until it holds
// wantedDocumentCount documents (1 by default).
//
// A request with stream=true and Accept: application/jsonl gets JSON
// lines as Vespa writes them: each document as a feed line, the token
// that covers a finished bucket after the next document line (which it
// does not cover), then the epilogue's token (none once the slice is
// done) and {"sessionStats": {"documentCount": N}}. A stream, too, ends
// after the bucket that brings it to wantedDocumentCount.
type Server struct {
	*httptest.Server
	Cluster string
	Docs    int
	Buckets int
	fault   func(r *http.Request, n int) int // n: the requests before this one
	// Streams, if false, answers a stream with a JSON page, as a server
	// without JSON lines does. New sets it.
	Streams bool
	// MaxVisits, if above 0, is how many visit requests the Server serves
	// at once, a stream for as long as it lasts: one more gets a 429, as
	// Vespa answers too many visitors.
	MaxVisits int

	// ChunkBuckets is how many buckets a request that deletes or updates
	// by selection processes before it answers; 0: 4. BucketTime is how
	// long each takes.
	ChunkBuckets int
	BucketTime   time.Duration

	mu       sync.Mutex
	visiting int
	refused  int
	requests int
	served   map[int]int // document: times served
	deleted  map[int]bool
	fields   map[int]map[string]any // the fields of a document updated
	updates  map[int]int            // document: updates applied
	buckets  int                    // buckets processed, by deletes and updates
}

// NewServer starts a Server of docs documents in buckets buckets,
// answering what fault says (0 for a page, a status, or Reset; fault may
// be nil), for a program as well as a test: the caller closes it with
// Close.
func NewServer(docs, buckets int, fault func(r *http.Request, n int) int) *Server {
	s := NewUnstartedServer(docs, buckets, fault)
	s.Start()
	return s
}

// NewUnstartedServer returns a Server as NewServer does, but not started:
// the caller sets its fields (MaxVisits, ChunkBuckets, BucketTime,
// Streams) and then calls Start, as with httptest.NewUnstartedServer; a
// field set once the Server serves races with its requests.
func NewUnstartedServer(docs, buckets int, fault func(r *http.Request, n int) int) *Server {
	s := &Server{Cluster: "music", Docs: docs, Buckets: buckets, fault: fault, served: map[int]int{}, Streams: true,
		deleted: map[int]bool{}, fields: map[int]map[string]any{}, updates: map[int]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	return s
}

// New starts a Server as NewServer does, and closes it when the test
// ends.
func New(t testing.TB, docs, buckets int, fault func(r *http.Request, n int) int) *Server {
	t.Helper()
	s := NewServer(docs, buckets, fault)
	t.Cleanup(s.Close)
	return s
}

// Served returns how often each document was served, by number.
func (s *Server) Served() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.served)
}

// Sent returns how many documents the server wrote, repeats included.
func (s *Server) Sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.served {
		n += k
	}
	return n
}

// Refused returns how many requests the server refused for MaxVisits.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Requests returns how many requests the server received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.requests
	s.requests++
	s.mu.Unlock()
	cut, failAfterPart, answered := s.injectFault(w, r, n)
	if answered || !s.admit(w) {
		return
	}
	defer func() {
		s.mu.Lock()
		s.visiting--
		s.mu.Unlock()
	}()
	q := r.URL.Query()
	process := r.Method == http.MethodDelete || r.Method == http.MethodPut
	switch {
	case process && (r.URL.Path == "/document/v1/" && r.Method == http.MethodDelete || r.URL.Path == "/document/v1/music/music/docid/"):
	case r.Method == http.MethodGet && r.URL.Path == "/document/v1/music/music/docid/": // its documents are all of music
	case r.Method != http.MethodGet || r.URL.Path != "/document/v1/":
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "no visit at " + r.Method + " " + r.URL.Path})
		return
	}
	if c := q.Get("cluster"); c != s.Cluster {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("Your Vespa deployment has no content cluster '%s', only '%s'", c, s.Cluster)})
		return
	}
	buckets, next, token, ok := s.slicing(w, q)
	if !ok {
		return
	}
	if process {
		s.process(w, r, buckets, next, token, cut, failAfterPart)
		return
	}
	match := func(map[string]any) bool { return true }
	if sel := q.Get("selection"); sel != "" {
		if match, ok = matcher(sel); !ok {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("Could not parse document selection %q", sel)})
			return
		}
	}
	wanted := atoi(q.Get("wantedDocumentCount"), 1)
	if s.Streams && q.Get("stream") == "true" && strings.Contains(r.Header.Get("Accept"), "application/jsonl") {
		s.stream(w, buckets, next, wanted, token, cut, match)
		return
	}
	s.page(w, buckets, next, wanted, token, cut, match)
}

// injectFault applies the fault function to request n: a cut or a
// failure after part of a chunk to come, or an answer given at once
// (answered), a reset connection included.
func (s *Server) injectFault(w http.ResponseWriter, r *http.Request, n int) (cut, failAfterPart int, answered bool) {
	cut = -1
	if s.fault == nil {
		return cut, 0, false
	}
	switch code := s.fault(r, n); {
	case code <= partBase:
		failAfterPart = partBase - code
	case code <= cutBase:
		cut = cutBase - code
	case code == Reset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return cut, 0, true
			}
		}
		w.WriteHeader(http.StatusBadGateway)
		return cut, 0, true
	case code != 0:
		writeJSON(w, code, map[string]any{"message": fmt.Sprintf("fault %d", code)})
		return cut, 0, true
	}
	return cut, failAfterPart, false
}

// admit counts a visitor in, or answers 429 past MaxVisits at once.
func (s *Server) admit(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.MaxVisits > 0 && s.visiting >= s.MaxVisits {
		s.refused++
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "too many visitors"})
		return false
	}
	s.visiting++
	return true
}

// slicing reads the request's slice and continuation: the slice's buckets,
// the index of the next among them, and the token of an index; it answers
// 400 to a bad slicing or a token of another (ok false).
func (s *Server) slicing(w http.ResponseWriter, q url.Values) (buckets []int, next int, token func(int) string, ok bool) {
	slices, id := atoi(q.Get("slices"), 1), atoi(q.Get("sliceId"), 0)
	if slices < 1 || id < 0 || id >= slices {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "bad slices or sliceId"})
		return nil, 0, nil, false
	}
	if tok := q.Get("continuation"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		var ts, ti int
		if err == nil {
			_, err = fmt.Sscanf(string(b), "%d:%d:%d", &ts, &ti, &next)
		}
		if err != nil || ts != slices || ti != id {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "continuation token not valid for this slicing"})
			return nil, 0, nil, false
		}
	}
	for b := id; b < s.Buckets; b += slices {
		buckets = append(buckets, b)
	}
	token = func(next int) string {
		if next == len(buckets) {
			return ""
		}
		return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d:%d:%d", slices, id, next)))
	}
	return buckets, next, token, true
}

// page answers a visit of a page: the matching documents of the buckets
// from next on, until wanted are found, and the token after them; cut at
// byte cut (if not negative) and the connection aborted.
func (s *Server) page(w http.ResponseWriter, buckets []int, next, wanted int, token func(int) string, cut int, match func(map[string]any) bool) {
	var docs []map[string]any
	var served []int
	for ; next < len(buckets) && len(docs) < wanted; next++ {
		for d := buckets[next]; d < s.Docs; d += s.Buckets {
			if f, ok := s.document(d); ok && match(f) {
				docs = append(docs, map[string]any{"id": fmt.Sprintf("id:music:music::%d", d), "fields": f})
				served = append(served, d)
			}
		}
	}
	page := map[string]any{"pathId": "/document/v1/", "documents": docs, "documentCount": len(docs)}
	if tok := token(next); tok != "" {
		page["continuation"] = tok
	}
	body, _ := json.Marshal(page)
	if cut >= 0 && cut < len(body) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	s.serve1(served)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

// serve1 counts the documents served.
func (s *Server) serve1(docs []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range docs {
		s.served[d]++
	}
}

// stream writes the slice's buckets from next on as JSON lines, with
// Vespa's order of tokens, cutting the connection after cut lines if cut
// is not negative.
func (s *Server) stream(w http.ResponseWriter, buckets []int, next, wanted int, token func(int) string, cut int, match func(map[string]any) bool) {
	w.Header().Set("Content-Type", "application/jsonl; charset=UTF-8")
	lines := 0
	write := func(line string) {
		if lines == cut {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		lines++
		_, _ = io.WriteString(w, line+"\n")
	}
	tokenLine := func(next int) {
		if tok := token(next); tok != "" {
			write(fmt.Sprintf(`{"continuation":{"token":%q,"percentFinished":%d}}`, tok, 100*next/len(buckets)))
		} else {
			write(`{"continuation":{"percentFinished":100}}`)
		}
	}
	sent, pending := 0, -1
	for ; next < len(buckets) && sent < wanted; next++ {
		for d := buckets[next]; d < s.Docs; d += s.Buckets {
			f, ok := s.document(d)
			if !ok || !match(f) {
				continue
			}
			fj, _ := json.Marshal(f)
			write(fmt.Sprintf(`{"put":"id:music:music::%d","fields":%s}`, d, fj))
			s.serve1([]int{d})
			sent++
			if pending >= 0 { // the token of a finished bucket goes out after the next document
				tokenLine(pending)
				pending = -1
			}
		}
		pending = next + 1
	}
	tokenLine(next)
	write(fmt.Sprintf(`{"sessionStats":{"documentCount":%d}}`, sent))
}

func atoi(s string, def int) int {
	if strings.TrimSpace(s) == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
