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
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Reset is the fault that makes the Server reset the connection.
const Reset = -1

// Server is a document/v1 endpoint that serves visits of its corpus:
// documents id:music:music::N (N from 0) with the fields {"n": N}, in
// Buckets buckets (document N in bucket N mod Buckets), of the content
// cluster Cluster. A page holds whole buckets, until it holds
// wantedDocumentCount documents (1 by default).
type Server struct {
	*httptest.Server
	Cluster string
	Docs    int
	Buckets int
	fault   func(r *http.Request, n int) int // n: the requests before this one

	mu       sync.Mutex
	requests int
	served   map[int]int // document: times served
}

// New starts a Server of docs documents in buckets buckets, answering
// what fault says (0 for a page, a status, or Reset; fault may be nil),
// and closes it when the test ends.
func New(t testing.TB, docs, buckets int, fault func(r *http.Request, n int) int) *Server {
	t.Helper()
	s := &Server{Cluster: "music", Docs: docs, Buckets: buckets, fault: fault, served: map[int]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Served returns how often each document was served, by number.
func (s *Server) Served() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.served))
	for k, v := range s.served {
		out[k] = v
	}
	return out
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
	if s.fault != nil {
		switch code := s.fault(r, n); {
		case code == Reset:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		case code != 0:
			writeJSON(w, code, map[string]any{"message": fmt.Sprintf("fault %d", code)})
			return
		}
	}
	q := r.URL.Query()
	if r.Method != http.MethodGet || r.URL.Path != "/document/v1/" {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "no visit at " + r.URL.Path})
		return
	}
	if c := q.Get("cluster"); c != s.Cluster {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("Your Vespa deployment has no content cluster '%s', only '%s'", c, s.Cluster)})
		return
	}
	slices, id := atoi(q.Get("slices"), 1), atoi(q.Get("sliceId"), 0)
	wanted := atoi(q.Get("wantedDocumentCount"), 1)
	if slices < 1 || id < 0 || id >= slices {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "bad slices or sliceId"})
		return
	}
	next := 0 // the index of the next bucket among the slice's
	if tok := q.Get("continuation"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		var ts, ti int
		if err == nil {
			_, err = fmt.Sscanf(string(b), "%d:%d:%d", &ts, &ti, &next)
		}
		if err != nil || ts != slices || ti != id {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "continuation token not valid for this slicing"})
			return
		}
	}
	var buckets []int // the slice's buckets, in order
	for b := id; b < s.Buckets; b += slices {
		buckets = append(buckets, b)
	}
	var docs []map[string]any
	s.mu.Lock()
	for ; next < len(buckets) && len(docs) < wanted; next++ {
		for d := buckets[next]; d < s.Docs; d += s.Buckets {
			docs = append(docs, map[string]any{"id": fmt.Sprintf("id:music:music::%d", d), "fields": map[string]any{"n": d}})
			s.served[d]++
		}
	}
	s.mu.Unlock()
	page := map[string]any{"pathId": "/document/v1/", "documents": docs, "documentCount": len(docs)}
	if next < len(buckets) {
		page["continuation"] = base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d:%d:%d", slices, id, next)))
	}
	writeJSON(w, http.StatusOK, page)
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
