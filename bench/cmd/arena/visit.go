package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// visitStore holds the corpus (the -docs documents of the feed file,
// document i in bucket i mod -buckets) and serves document/v1 visits of it
// as a Vespa container does: GET /document/v1/?cluster=music or
// /document/v1/music/music/docid/, with slices and sliceId (bucket b in
// slice b mod slices), continuation (a token bound to the slicing),
// wantedDocumentCount (a page holds whole buckets until it has that many)
// and stream=true with Accept: application/jsonl (a feed line a document;
// as in Vespa's StreamingJsonLinesResponse, the token that covers a
// finished bucket comes after the next document line, then the last token,
// none once the slice is done, and {"sessionStats":…}). A stream runs to
// its slice's end whatever wantedDocumentCount says. The documents are in
// the default bucket space; the global one (bucketSpace=global) is empty. GET
// /document/v1/music/music/docid/N is one document.
//
// Each bucket takes bucketTime; at most inflight visits are served at once
// (429 beyond, as Vespa answers too many visitors); a request ends after
// timeout with a token. fault answers 503 before a request starts; reset
// cuts a page before it is written, and a stream in the middle of a bucket,
// for that share of the buckets. An outage answers 503 (or resets) a
// request that starts in it and cuts one in progress at its next bucket;
// a visit whose client went away stops there too.
type visitStore struct {
	docs, buckets int
	bucketTime    time.Duration
	timeout       time.Duration
	inflight      int64
	fault, reset  float64
	outage        func() bool
	outageReset   bool
	clock         *runClock

	mu  sync.Mutex
	rng *rand.Rand

	visiting                           atomic.Int64
	sent, cut, pages, streams, refused atomic.Int64
}

func newVisitStore(c config, clock *runClock) *visitStore {
	return &visitStore{docs: c.docs, buckets: c.buckets, bucketTime: c.bucketTime, timeout: c.visitTimeout,
		inflight: int64(c.inflight), fault: c.fault, reset: c.reset, clock: clock,
		rng: rand.New(rand.NewPCG(c.seed, 11))}
}

func (v *visitStore) roll() float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rng.Float64()
}

func (v *visitStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" { // the container's status page
		writeJSON(w, http.StatusOK, `{"handlers":[{"id":"com.yahoo.document.restapi.resource.DocumentV1ApiHandler","class":"com.yahoo.document.restapi.resource.DocumentV1ApiHandler","serverBindings":["http://*/document/v1/*"]}]}`)
		return
	}
	if _, _, key, ok := docID(r.URL.Path); ok && key != "" {
		v.getOne(w, key)
		return
	}
	if r.URL.Path != docPath && r.URL.Path != docPath+"music/music/docid/" && r.URL.Path != docPath+"music/music/docid" {
		writeJSON(w, http.StatusNotFound, `{"message":"no visit at `+r.URL.Path+`"}`)
		return
	}
	if !v.admit(w) {
		return
	}
	if v.inflight > 0 {
		defer v.visiting.Add(-1)
	}
	q := r.URL.Query()
	if c := q.Get("cluster"); c != "" && c != "music" {
		writeJSON(w, http.StatusBadRequest, `{"message":"Your Vespa deployment has no content cluster '`+c+`', only 'music'"}`)
		return
	}
	if bs := q.Get("bucketSpace"); bs != "" && bs != "default" && bs != "global" {
		writeJSON(w, http.StatusBadRequest, `{"message":"no bucket space '`+bs+`'"}`)
		return
	}
	buckets, next, token, ok := v.slicing(w, q)
	if !ok {
		return
	}
	deadline := time.Time{}
	if v.timeout > 0 {
		deadline = time.Now().Add(v.timeout)
	}
	if q.Get("stream") == "true" && strings.Contains(r.Header.Get("Accept"), "application/jsonl") {
		v.streams.Add(1)
		v.stream(w, r, buckets, next, deadline, token)
		return
	}
	v.pages.Add(1)
	v.page(w, r, buckets, next, number(q.Get("wantedDocumentCount"), 1), deadline, token)
}

// admit answers a request the store does not take now: an outage (503 or
// a reset), a fault (503), or past -inflight visits at once (429). A
// visit admitted under -inflight holds a slot, which the caller gives
// back.
func (v *visitStore) admit(w http.ResponseWriter) bool {
	if v.outage != nil && v.outage() {
		if v.outageReset {
			resetConn(w)
			return false
		}
		writeJSON(w, http.StatusServiceUnavailable, `{"message":"the store is out"}`)
		return false
	}
	if v.roll() < v.fault {
		writeJSON(w, http.StatusServiceUnavailable, `{"message":"fault"}`)
		return false
	}
	if v.inflight > 0 && v.visiting.Add(1) > v.inflight {
		v.visiting.Add(-1)
		v.refused.Add(1)
		writeJSON(w, http.StatusTooManyRequests, `{"message":"Too many pending visitor sessions"}`)
		return false
	}
	return true
}

// slicing reads the request's slice and continuation: the slice's buckets
// (none in the global bucket space), the index of the next among them, and
// the token of an index; it answers 400 to a bad slicing or a token of
// another (ok false).
func (v *visitStore) slicing(w http.ResponseWriter, q url.Values) (buckets []int, next int, token func(int) string, ok bool) {
	slices, id, wanted := number(q.Get("slices"), 1), number(q.Get("sliceId"), 0), number(q.Get("wantedDocumentCount"), 1)
	if slices < 1 || id < 0 || id >= slices || wanted < 1 {
		writeJSON(w, http.StatusBadRequest, `{"message":"bad slices, sliceId or wantedDocumentCount"}`)
		return nil, 0, nil, false
	}
	if tok := q.Get("continuation"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		var ts, ti int
		if err == nil {
			_, err = fmt.Sscanf(string(b), "%d:%d:%d", &ts, &ti, &next)
		}
		if err != nil || ts != slices || ti != id || next < 0 {
			writeJSON(w, http.StatusBadRequest, `{"message":"continuation token not valid for this slicing"}`)
			return nil, 0, nil, false
		}
	}
	for b := id; b < v.buckets && q.Get("bucketSpace") != "global"; b += slices {
		buckets = append(buckets, b)
	}
	token = func(next int) string {
		if next >= len(buckets) {
			return ""
		}
		return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d:%d", slices, id, next))
	}
	return buckets, next, token, true
}

// page answers a visit of a page: the buckets from next on, until wanted
// documents or the deadline, and the token after them; the connection
// reset instead for a share -reset.
func (v *visitStore) page(w http.ResponseWriter, r *http.Request, buckets []int, next, wanted int, deadline time.Time, token func(int) string) {
	var b strings.Builder
	b.WriteString(`{"pathId":"` + r.URL.Path + `","documents":[`)
	count := 0
	for ; next < len(buckets) && count < wanted && (deadline.IsZero() || time.Now().Before(deadline)); next++ {
		v.visitBucket()
		if v.gone(w, r) {
			return
		}
		for d := buckets[next]; d < v.docs; d += v.buckets {
			if count > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":"` + docIDOf(d) + `","fields":` + fieldsOf(d) + `}`)
			count++
		}
	}
	b.WriteString(`],"documentCount":` + strconv.Itoa(count))
	if tok := token(next); tok != "" {
		b.WriteString(`,"continuation":"` + tok + `"`)
	}
	b.WriteString("}\n")
	if v.roll() < v.reset {
		v.cut.Add(1)
		resetConn(w)
		return
	}
	v.sent.Add(int64(count))
	writeJSON(w, http.StatusOK, b.String())
}

// gone reports whether a visit in progress ends before its next bucket:
// the client went away (Vespa's handler stops visiting then, and frees the
// visitor), or an outage began, which cuts it.
func (v *visitStore) gone(w http.ResponseWriter, r *http.Request) bool {
	if r.Context().Err() != nil {
		return true
	}
	if v.outage != nil && v.outage() {
		v.cut.Add(1)
		resetConn(w)
		return true
	}
	return false
}

// visitBucket takes one bucket's time.
func (v *visitStore) visitBucket() {
	if v.bucketTime > 0 {
		time.Sleep(time.Duration(float64(v.bucketTime) / v.clock.factor()))
	}
}

// stream writes the slice's buckets from next on as JSON lines, in
// Vespa's order of tokens, until the slice's end or the deadline.
func (v *visitStore) stream(w http.ResponseWriter, r *http.Request, buckets []int, next int, deadline time.Time, token func(int) string) {
	w.Header().Set("Content-Type", "application/jsonl; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	flush := func() { w.(http.Flusher).Flush() }
	tokenLine := func(next int) {
		if tok := token(next); tok != "" {
			fmt.Fprintf(w, `{"continuation":{"token":%q,"percentFinished":%d}}`+"\n", tok, 100*next/max(1, len(buckets)))
		} else {
			_, _ = io.WriteString(w, `{"continuation":{"percentFinished":100}}`+"\n")
		}
	}
	sent, pending := 0, -1
	for ; next < len(buckets) && (deadline.IsZero() || time.Now().Before(deadline)); next++ {
		v.visitBucket()
		if v.gone(w, r) {
			return
		}
		cutAt := -1
		if v.roll() < v.reset {
			cutAt = 0
			if n := (v.docs - buckets[next] + v.buckets - 1) / v.buckets; n > 1 {
				cutAt = n / 2
			}
		}
		i := 0
		for d := buckets[next]; d < v.docs; d += v.buckets {
			if i == cutAt {
				flush()
				v.cut.Add(1)
				panic(http.ErrAbortHandler)
			}
			i++
			if _, err := io.WriteString(w, `{"put":"`+docIDOf(d)+`","fields":`+fieldsOf(d)+"}\n"); err != nil {
				return // the client went away
			}
			v.sent.Add(1)
			sent++
			if pending >= 0 { // the token of a finished bucket goes out after the next document
				tokenLine(pending)
				pending = -1
			}
		}
		pending = next + 1
		flush()
	}
	tokenLine(next)
	fmt.Fprintf(w, `{"sessionStats":{"documentCount":%d}}`+"\n", sent)
}

// getOne serves one document by its number.
func (v *visitStore) getOne(w http.ResponseWriter, key string) {
	n, err := strconv.Atoi(key)
	if err != nil || n < 0 || n >= v.docs {
		writeJSON(w, http.StatusNotFound, `{"id":"id:music:music::`+key+`","message":"not found"}`)
		return
	}
	writeJSON(w, http.StatusOK, `{"pathId":"/document/v1/music/music/docid/`+key+`","id":"`+docIDOf(n)+`","fields":`+fieldsOf(n)+`}`)
}

// number parses a query parameter, def if absent, -1 if not a number.
func number(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
