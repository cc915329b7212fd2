package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// store is the loopback document store behind nginx: it takes document/v1
// puts, answers 503 to a share of them, resets the connection of another
// share, answers 503 to every one during an outage, and counts what it
// stored, by document.
type store struct {
	fault, reset float64
	outage       func() bool // true while the server is out; nil: never
	outageReset  bool        // the outage resets connections instead of answering 503

	mu     sync.Mutex
	stored map[string]int // document id: times stored
	rng    *rand.Rand

	requests, faults, resets, outaged atomic.Int64
}

func newStore(fault, reset float64, seed uint64) *store {
	return &store{fault: fault, reset: reset, stored: map[string]int{}, rng: rand.New(rand.NewPCG(seed, 7))}
}

const docPath = "/document/v1/"

// ServeHTTP takes a put of /document/v1/NS/TYPE/docid/KEY.
func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	ns, typ, key, ok := docID(r.URL.Path)
	if r.Method != http.MethodPost || !ok {
		http.Error(w, `{"message":"not a put of a document"}`, http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	if s.outage != nil && s.outage() {
		s.outaged.Add(1)
		if s.outageReset {
			resetConn(w)
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, `{"message":"the store is out"}`)
		return
	}
	s.mu.Lock()
	roll := s.rng.Float64()
	s.mu.Unlock()
	switch {
	case roll < s.fault:
		s.faults.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, `{"message":"fault"}`)
		return
	case roll < s.fault+s.reset:
		s.resets.Add(1)
		resetConn(w)
		return
	}
	var doc struct {
		Fields json.RawMessage `json:"fields"`
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Fields) == 0 {
		writeJSON(w, http.StatusBadRequest, `{"message":"a put without fields"}`)
		return
	}
	id := "id:" + ns + ":" + typ + "::" + key
	s.mu.Lock()
	s.stored[id]++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, `{"id":"`+id+`"}`)
}

// resetConn closes the connection of w without an answer.
func resetConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// docID splits /document/v1/NS/TYPE/docid/KEY.
func docID(path string) (ns, typ, key string, ok bool) {
	rest, found := strings.CutPrefix(path, docPath)
	if !found {
		return "", "", "", false
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) != 4 || parts[2] != "docid" || parts[3] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[3], true
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// counts returns the documents stored at least once, and those stored more
// than once.
func (s *store) counts() (stored, twice int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.stored {
		stored++
		if n > 1 {
			twice++
		}
	}
	return stored, twice
}

// window says whether now lies in [start+at, start+at+dur), start being
// what started holds (UnixNano), or never before it is set.
func window(started *atomic.Int64, at, dur time.Duration) func() bool {
	return func() bool {
		s := started.Load()
		if s == 0 || dur <= 0 {
			return false
		}
		since := time.Since(time.Unix(0, s))
		return since >= at && since < at+dur
	}
}
