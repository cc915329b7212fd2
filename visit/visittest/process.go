package visittest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The Server deletes and updates by selection as Vespa's handler does: a
// DELETE on /document/v1/ or /document/v1/music/music/docid/, or a PUT on
// the latter with an update ({"fields": {"n": {"increment": 1}}, say),
// with a selection, processes its slice for ChunkBuckets buckets from the
// continuation on, applying the remove or the update to each document
// that matches, and answers {pathId, documentCount, continuation}, with no
// continuation once the slice is done. A fault of FailAfterPart(status)
// processes part of the chunk and answers status with a message and no
// continuation (a 504 "No buckets visited within timeout" with nothing
// processed); one of CutAfter processes part and cuts the connection.
//
// Its selections are those of its documents' field n: "true", "music.n <
// K", "music.n >= K", "music.n % M == R", and, around any of them, the one
// a marker makes: "(S) and music.FIELD != \"RUN\"". Another is a 400, as
// Vespa answers a selection it cannot parse.

var (
	markerSel = regexp.MustCompile(`^\((.*)\) and music\.(\w+) != "([^"]*)"$`)
	nSel      = regexp.MustCompile(`^music\.n (<|>=) (-?\d+)$`)
	modSel    = regexp.MustCompile(`^music\.n % (\d+) == (\d+)$`)
)

// matcher returns whether a document's fields match sel, or false if sel
// is not a selection the Server reads.
func matcher(sel string) (func(map[string]any) bool, bool) {
	sel = strings.TrimSpace(sel)
	if m := markerSel.FindStringSubmatch(sel); m != nil {
		inner, ok := matcher(m[1])
		field, run := m[2], m[3]
		return func(f map[string]any) bool { return inner(f) && f[field] != run }, ok
	}
	num := func(f map[string]any) int {
		switch v := f["n"].(type) {
		case int:
			return v
		case float64:
			return int(v)
		}
		return 0
	}
	switch {
	case sel == "true":
		return func(map[string]any) bool { return true }, true
	case nSel.MatchString(sel):
		m := nSel.FindStringSubmatch(sel)
		k, _ := strconv.Atoi(m[2])
		if m[1] == "<" {
			return func(f map[string]any) bool { return num(f) < k }, true
		}
		return func(f map[string]any) bool { return num(f) >= k }, true
	case modSel.MatchString(sel):
		m := modSel.FindStringSubmatch(sel)
		mod, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[2])
		if mod == 0 {
			return nil, false
		}
		return func(f map[string]any) bool { return num(f)%mod == r }, true
	}
	return nil, false
}

// document returns the fields of document d, or false once it is deleted.
// s.mu is not held.
func (s *Server) document(d int) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.documentLocked(d)
}

func (s *Server) documentLocked(d int) (map[string]any, bool) {
	if s.deleted[d] {
		return nil, false
	}
	f := map[string]any{"n": d}
	for k, v := range s.fields[d] {
		f[k] = v
	}
	return f, true
}

// process deletes or updates the documents of the slice's buckets from
// next on that the request's selection matches.
func (s *Server) process(w http.ResponseWriter, r *http.Request, buckets []int, next int, token func(int) string, cut, failAfterPart int) {
	match, ok := matcher(r.URL.Query().Get("selection"))
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("Could not parse document selection %q", r.URL.Query().Get("selection"))})
		return
	}
	var update map[string]map[string]any
	if r.Method == http.MethodPut {
		var u struct {
			Fields map[string]map[string]any `json:"fields"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &u); err != nil || u.Fields == nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Could not parse the update: " + string(body)})
			return
		}
		update = u.Fields
	}
	chunk := s.ChunkBuckets
	if chunk <= 0 {
		chunk = 4
	}
	end := min(next+chunk, len(buckets))
	part := end // the buckets processed before a fault
	switch {
	case failAfterPart == http.StatusGatewayTimeout:
		part = next
	case failAfterPart != 0, cut >= 0:
		part = next + (end-next+1)/2
	}
	count := 0
	for b := next; b < part; b++ {
		if s.BucketTime > 0 {
			time.Sleep(s.BucketTime)
		}
		s.mu.Lock()
		s.buckets++
		for d := buckets[b]; d < s.Docs; d += s.Buckets {
			f, alive := s.documentLocked(d)
			if !alive || !match(f) {
				continue
			}
			count++
			if update == nil {
				s.deleted[d] = true
				continue
			}
			s.apply(d, f, update)
		}
		s.mu.Unlock()
	}
	switch {
	case failAfterPart == http.StatusGatewayTimeout:
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"pathId": r.URL.Path, "message": "No buckets visited within timeout of 30000ms (request timeout -5000ms)"})
		return
	case failAfterPart != 0:
		writeJSON(w, failAfterPart, map[string]any{"pathId": r.URL.Path, "message": "Visiting failed: ERROR: a content node failed"})
		return
	case cut >= 0:
		panic(http.ErrAbortHandler)
	}
	resp := map[string]any{"pathId": r.URL.Path, "documentCount": count}
	if tok := token(end); tok != "" {
		resp["continuation"] = tok
	}
	writeJSON(w, http.StatusOK, resp)
}

// apply applies update to document d, whose fields are f. s.mu is held.
func (s *Server) apply(d int, f map[string]any, update map[string]map[string]any) {
	if s.fields[d] == nil {
		s.fields[d] = map[string]any{}
	}
	for name, ops := range update {
		for op, v := range ops {
			switch op {
			case "assign":
				s.fields[d][name] = v
			case "increment":
				n, _ := v.(float64)
				cur := 0.0
				switch c := f[name].(type) {
				case int:
					cur = float64(c)
				case float64:
					cur = c
				}
				s.fields[d][name] = cur + n
			}
		}
	}
	s.updates[d]++
}

// Deleted returns how many documents the Server deleted.
func (s *Server) Deleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deleted)
}

// IsDeleted reports whether document d is deleted.
func (s *Server) IsDeleted(d int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted[d]
}

// Updates returns how many updates the Server applied to each document
// updated, by number.
func (s *Server) Updates() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.updates)
}

// ProcessedBuckets returns how many buckets the deletes and updates by
// selection processed, those processed again included.
func (s *Server) ProcessedBuckets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buckets
}

// ChunkFaults is a fault function (for NewServer) that fails requests as
// a busy Vespa can, in turn: of every 23 requests, two answer a 500 after
// part of their chunk, one a 504 with nothing processed, one is cut after
// part of its chunk, one answers 503 and one 429.
func ChunkFaults(_ *http.Request, n int) int {
	switch n % 23 {
	case 3, 14:
		return FailAfterPart(http.StatusInternalServerError)
	case 7:
		return FailAfterPart(http.StatusGatewayTimeout)
	case 10:
		return CutAfter(0)
	case 17:
		return http.StatusServiceUnavailable
	case 20:
		return http.StatusTooManyRequests
	}
	return 0
}
