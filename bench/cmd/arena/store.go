package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// store is the loopback document store behind nginx: it takes document/v1
// puts, answers 503 to a share of them, resets the connection of another
// share, answers 503 to every one during an outage, serves a bounded
// number at once with -inflight, and counts what it stored, by document,
// and when.
type store struct {
	fault, reset float64
	outage       func() bool // true while the server is out; nil: never
	outageReset  bool        // the outage resets connections instead of answering 503
	service      time.Duration
	slots        chan struct{} // -inflight; nil: no bound
	queue        int64
	clock        *runClock
	checkFields  bool // a put must carry the document's fields (a copy)

	mu      sync.Mutex
	stored  map[string]int // document id: times stored
	rng     *rand.Rand
	ackedAt []int32 // acknowledgements by 10 ms since the start

	requests, faults, resets, outaged, refused, corrupt, waiting atomic.Int64
}

// tick is the resolution of the store's timeline of acknowledgements.
const tick = 10 * time.Millisecond

func newStore(c config, clock *runClock) *store {
	s := &store{fault: c.fault, reset: c.reset, service: c.service, queue: int64(c.queue), clock: clock,
		checkFields: c.copy, stored: map[string]int{}, rng: rand.New(rand.NewPCG(c.seed, 7))}
	if c.inflight > 0 && !c.visit && !c.copy {
		s.slots = make(chan struct{}, c.inflight)
	}
	return s
}

const docPath = "/document/v1/"

// ServeHTTP takes a put of /document/v1/NS/TYPE/docid/KEY.
func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	ns, typ, key, ok := docID(r.URL.Path)
	if r.Method != http.MethodPost && r.Method != http.MethodPut || !ok {
		writeJSON(w, http.StatusBadRequest, `{"message":"not a put of a document"}`)
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
	if !s.take(r) {
		s.refused.Add(1)
		writeJSON(w, http.StatusTooManyRequests, `{"message":"the store is busy"}`)
		return
	}
	defer s.give()
	if s.service > 0 {
		time.Sleep(time.Duration(float64(s.service) / s.clock.factor()))
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
	if s.checkFields && !sameFields(id, doc.Fields) {
		s.corrupt.Add(1)
	}
	s.mu.Lock()
	s.stored[id]++
	at := int(s.clock.since() / tick)
	for len(s.ackedAt) <= at {
		s.ackedAt = append(s.ackedAt, 0)
	}
	s.ackedAt[at]++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, `{"id":"`+id+`"}`)
}

// take takes one of the store's slots, waiting in its queue if there is
// room there; it reports false for a 429.
func (s *store) take(r *http.Request) bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	if s.waiting.Add(1) > s.queue {
		s.waiting.Add(-1)
		return false
	}
	defer s.waiting.Add(-1)
	select {
	case s.slots <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *store) give() {
	if s.slots != nil {
		<-s.slots
	}
}

// sameFields reports whether fields are those of the document id.
func sameFields(id string, fields json.RawMessage) bool {
	n, ok := corpusNumber(id)
	if !ok {
		return false
	}
	var got, want map[string]any
	return json.Unmarshal(fields, &got) == nil && json.Unmarshal([]byte(fieldsOf(n)), &want) == nil &&
		reflect.DeepEqual(got, want)
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

// timeline returns the acknowledgements by tick since the start.
func (s *store) timeline() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.ackedAt...)
}
