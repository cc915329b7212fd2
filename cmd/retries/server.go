package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// tokenBucket admits rate events per second on average, and up to burst at
// once. It starts full. It is safe for concurrent use.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens added per second
	burst  float64 // the bucket's size
	tokens float64
	last   time.Time
}

func newTokenBucket(rate, burst float64, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: now}
}

// allow takes a token at time now and reports whether there was one.
func (b *tokenBucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// fault is what the demo server does to an admitted request.
type fault int

const (
	faultNone        fault = iota // process it and answer 200
	faultUnavailable              // answer 503 without processing it
	faultReset                    // reset the connection without processing it
	faultThrottle                 // answer 429 as if over the rate (for tests)
)

// faultFunc decides the fault for an admitted request for document id; n
// counts the earlier admitted requests for id.
type faultFunc func(id string, n int) fault

// randomFaults resets a fraction reset of admitted requests and answers 503
// to a fraction unavailable, independently of the document.
func randomFaults(unavailable, reset float64) faultFunc {
	return func(string, int) fault {
		switch u := rand.Float64(); {
		case u < reset:
			return faultReset
		case u < reset+unavailable:
			return faultUnavailable
		}
		return faultNone
	}
}

// demoServer is a document/v1-like endpoint that throttles, fails and
// resets connections, and keeps its own count of the documents it
// acknowledged. Faults happen before a request is processed (its body read
// and its document stored), so that a request that failed was never
// applied and retrying it cannot make a duplicate.
type demoServer struct {
	bucket *tokenBucket
	faults faultFunc

	mu       sync.Mutex
	admitted map[string]int // admitted requests per document
	acked    map[string]int // 200 answers per document

	requests, throttled, unavailable, resets, duplicates, rejected atomic.Int64
}

// demoPath is the path of the demo's documents, as in Vespa's document/v1
// API; the document's id follows it.
const demoPath = "/document/v1/demo/doc/docid/"

func newDemoServer(rate, burst float64, faults faultFunc) *demoServer {
	return &demoServer{
		bucket:   newTokenBucket(rate, burst, time.Now()),
		faults:   faults,
		admitted: map[string]int{},
		acked:    map[string]int{},
	}
}

// handler returns the server's HTTP handler.
func (s *demoServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+demoPath+"{id}", s.feed)
	return mux
}

// demoDoc is the JSON body of a feed request.
type demoDoc struct {
	Fields struct {
		ID    string `json:"id"`
		Title string `json:"title"`
		Text  string `json:"text"`
	} `json:"fields"`
}

func (s *demoServer) feed(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	id := r.PathValue("id")
	if !s.bucket.allow(time.Now()) {
		s.throttled.Add(1)
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"message": "rejecting: too many requests"})
		return
	}
	s.mu.Lock()
	n := s.admitted[id]
	s.admitted[id] = n + 1
	s.mu.Unlock()
	switch s.faults(id, n) {
	case faultThrottle:
		s.throttled.Add(1)
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"message": "rejecting: too many requests"})
		return
	case faultReset:
		if s.reset(w) {
			return
		}
		// The connection could not be taken over: fail the request instead.
		fallthrough
	case faultUnavailable:
		s.unavailable.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"message": "temporarily unavailable"})
		return
	}

	var doc demoDoc
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&doc); err != nil || doc.Fields.ID != id {
		s.rejected.Add(1)
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "body is not the document " + id})
		return
	}
	s.mu.Lock()
	k := s.acked[id]
	s.acked[id] = k + 1
	s.mu.Unlock()
	if k > 0 {
		s.duplicates.Add(1)
	}
	writeJSON(w, http.StatusOK, map[string]string{"pathId": r.URL.Path, "id": "id:demo:doc::" + id})
}

// reset closes the request's connection with a TCP RST (SO_LINGER 0) before
// anything is read or written, and reports whether it could.
func (s *demoServer) reset(w http.ResponseWriter) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return false
	}
	// Count before closing: once the client sees the reset it may finish,
	// and the counts are read, before this goroutine runs again.
	s.resets.Add(1)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
	return true
}

// ackedIDs returns a copy of the acknowledged documents and their 200 counts.
func (s *demoServer) ackedIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.acked))
	for id, n := range s.acked {
		m[id] = n
	}
	return m
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
