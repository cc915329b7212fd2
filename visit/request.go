package visit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errBusy is a stream the server refused with a 429: it serves no more
// visits at once.
var errBusy = errors.New("visit: 429 Too Many Requests")

// errAlone is a 429 to a request sent with no other of its endpoint in
// flight: the server serves no visit of this client at all, which is a
// failure, not a turn to wait for.
var errAlone = fmt.Errorf("%w, with no other request of this visit in flight", errBusy)

// errCut is a stream that ended without its epilogue.
var errCut = errors.New("visit: a stream cut short")

// request makes one request of slice s from where it stands, and hands
// out what it reads through emit as it reads it: a page whole, a stream
// at each continuation token and every WantedDocumentCount documents.
func (c *Client) request(ctx context.Context, s *slice, emit func([]Document, mark) bool) (err error) {
	waitStart := time.Now()
	n, err := s.ep.gate.enter(ctx)
	if err != nil {
		return err
	}
	s.excuse(time.Since(waitStart)) // waiting for a place is no outage
	var once sync.Once
	leave := func(busy bool) { once.Do(func() { s.ep.gate.leave(busy, n) }) }
	defer func() { leave(errors.Is(err, errBusy)) }()
	stream := !c.cfg.Pages && !s.ep.gate.crowded()
	rctx, stop := c.watch(ctx, s)
	defer stop()
	resp, err := s.ep.http.Do(c.newRequest(rctx, s, stream))
	if err != nil {
		return err // the wire counted it
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		s.ep.gate.took(n)
		defer func() { c.counts.count(ctx, err) }()
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if n == 1 {
			return errAlone
		}
		return errBusy
	case code/100 == 4 && code != http.StatusTooManyRequests:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var v struct{ Message string }
		if json.Unmarshal(body, &v) != nil || v.Message == "" {
			v.Message = strings.TrimSpace(string(body))
		}
		return &StatusError{Status: code, Message: c.secrets.Redact(v.Message)}
	case code != http.StatusOK:
		return fmt.Errorf("visit: %s", resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/jsonl" {
		return c.readStream(resp.Body, s, emit)
	}
	return c.readPage(resp.Body, s, emit, func() { leave(false) })
}

// newRequest returns the request of slice s from where it stands.
func (c *Client) newRequest(ctx context.Context, s *slice, stream bool) *http.Request {
	q := url.Values{}
	q.Set("cluster", c.cfg.Cluster)
	q.Set("slices", strconv.Itoa(c.cfg.Slices))
	q.Set("sliceId", strconv.Itoa(s.id))
	selection := c.cfg.Selection
	if pr := c.proc; pr != nil {
		selection = pr.selection
		q.Set("timeChunk", pr.timeChunk)
	} else {
		q.Set("wantedDocumentCount", strconv.Itoa(c.cfg.WantedDocumentCount)) // refused by the handler when it processes
	}
	for k, v := range map[string]string{"selection": selection, "fieldSet": c.cfg.FieldSet, "bucketSpace": c.cfg.BucketSpace, "continuation": s.token} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if stream {
		q.Set("stream", "true")
	}
	method, path, body := http.MethodGet, "/document/v1/", io.Reader(nil)
	if c.cfg.DocumentType != "" {
		path = "/document/v1/" + url.PathEscape(c.cfg.Namespace) + "/" + url.PathEscape(c.cfg.DocumentType) + "/docid/"
	}
	if pr := c.proc; pr != nil {
		method, path = pr.method, pr.path
		if pr.body != nil {
			body = bytes.NewReader(pr.body) // and GetBody, for a request asked again
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, s.ep.base+path+"?"+q.Encode(), body)
	if err != nil {
		panic(err) // the base URL was checked by New
	}
	for k, vs := range c.cfg.Header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if stream {
		req.Header.Set("Accept", "application/jsonl")
	}
	return req
}

// readPage reads a JSON page, whose token covers every document in it,
// and calls read once it has read it whole: the server is done with it.
func (c *Client) readPage(body io.Reader, s *slice, emit func([]Document, mark) bool, read func()) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("%w: %w", errCut, err)
	}
	read()
	var v struct {
		PathID        *string         `json:"pathId"`
		Documents     []Document      `json:"documents"`
		DocumentCount *int            `json:"documentCount"`
		Continuation  string          `json:"continuation"`
		Message       json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%w: a page that is not JSON: %v", errCut, err) // asked for again
	}
	if v.PathID == nil && v.Documents == nil && v.DocumentCount == nil && v.Continuation == "" && len(v.Message) == 0 {
		// A JSON object of another shape, such as a query container's
		// {"root": …}: read as a page, it would end the slice.
		return &StatusError{Status: http.StatusOK, Message: "the answer is not a document/v1 visit page (is the URL a document/v1 endpoint?): " +
			c.secrets.Redact(firstLine(data))}
	}
	docs := v.Documents[:0]
	for _, d := range v.Documents {
		if s.read(d.ID) {
			docs = append(docs, d)
		}
	}
	c.counts.documents.Add(int64(len(docs)))
	c.counts.dropped.Add(int64(len(v.Documents) - len(docs)))
	processed := 0
	if c.proc != nil && v.DocumentCount != nil {
		processed = *v.DocumentCount
		c.counts.documents.Add(int64(processed))
	}
	if len(docs) > 0 {
		s.progressed()
	} // a delete's or an update's count is no progress: only its token moving is
	mark := func() mark { m := s.mark(); m.processed = processed; return m }
	if msg := pageMessage(v.Message); msg != "" {
		// The server says the visit failed (an older Vespa answers a
		// session that failed so, with no token): the slice is asked again
		// from its token, and drops what it reads again. Its documents
		// are handed out; its token, if any, is not taken.
		if (len(docs) > 0 || processed > 0) && !emit(docs, mark()) {
			return errStopped
		}
		return fmt.Errorf("visit: the server failed the page: %s", c.secrets.Redact(msg))
	}
	if v.Continuation != s.token {
		s.progressed()
	}
	s.pageRead(v.Continuation)
	if !emit(docs, mark()) {
		return errStopped
	}
	return nil
}

// pageMessage returns the text of a page's "message": a string, or an
// object with a "text", or "" for none.
func pageMessage(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return strings.TrimSpace(text)
	}
	var m struct{ Text string }
	if json.Unmarshal(raw, &m) == nil && m.Text != "" {
		return strings.TrimSpace(m.Text)
	}
	if len(raw) > 0 && string(raw) != "null" {
		return string(raw)
	}
	return ""
}

// streamLine is one line of a JSON lines visit.
type streamLine struct {
	Put          string          `json:"put"`
	Fields       json.RawMessage `json:"fields"`
	Continuation *struct {
		Token string `json:"token"`
	} `json:"continuation"`
	SessionStats json.RawMessage `json:"sessionStats"`
	Message      *struct {
		Text     string `json:"text"`
		Severity string `json:"severity"`
	} `json:"message"`
}

// readStream reads JSON lines: documents as feed lines, each token after
// the document that follows the bucket it finishes, then the epilogue (the
// last token, or none once the slice is done) and the session's stats. A
// stream that ends before its stats, or says it failed, is an error: the
// slice goes on from the last token read, and drops what it read again.
// No token after an error message moves the slice (Vespa writes the
// epilogue of a failed session, whose progress may read finished), and
// the slice is done only once a stream that ended well said so.
func (c *Client) readStream(body io.Reader, s *slice, emit func([]Document, mark) bool) error {
	br := bufio.NewReaderSize(body, 64<<10)
	st := &stream{c: c, s: s, emit: emit}
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var l streamLine
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				if err == nil {
					return fmt.Errorf("visit: a stream line that is not JSON: %v", jerr)
				}
				// the last line, cut short: the end says what came of it
			} else if !st.take(&l) {
				return errStopped
			}
		}
		if err != nil {
			return st.end(err)
		}
	}
}

// stream is what readStream has read of one response: the documents not
// yet handed out, and what the stream said of itself.
type stream struct {
	c       *Client
	s       *slice
	emit    func([]Document, mark) bool
	batch   []Document
	moved   bool   // documents read since the last hand-out
	ended   bool   // the session's stats came
	done    bool   // the epilogue said the slice is done
	failure string // the server's error message, if it sent one
}

// flush hands out the batch with the slice's mark; false: stop.
func (st *stream) flush() bool {
	ok := st.emit(st.batch, st.s.mark())
	st.batch, st.moved = nil, false
	return ok
}

// take takes one line of the stream; false: the caller stopped the visit.
func (st *stream) take(l *streamLine) bool {
	c, s := st.c, st.s
	switch {
	case l.Put != "":
		if s.read(l.Put) {
			st.batch = append(st.batch, Document{ID: l.Put, Fields: l.Fields})
			c.counts.documents.Add(1)
			s.progressed()
		} else {
			c.counts.dropped.Add(1)
		}
		st.moved = true
		return len(st.batch) < c.cfg.WantedDocumentCount || st.flush()
	case l.Continuation != nil && st.failure != "": // a failed session's: it moves nothing
	case l.Continuation != nil && l.Continuation.Token == "":
		st.done = true // once the stream ends well
	case l.Continuation != nil:
		if l.Continuation.Token != s.token {
			s.tokenRead(l.Continuation.Token)
			s.progressed()
		}
		return st.flush()
	case l.SessionStats != nil:
		st.ended = true
	case l.Message != nil && strings.EqualFold(l.Message.Severity, "error"):
		st.failure = l.Message.Text
	}
	return true
}

// end says how the stream ended, with err from its last read: the
// documents read handed out, the slice done if it said so and ended well.
func (st *stream) end(err error) error {
	if st.moved && !st.flush() {
		return errStopped
	}
	switch {
	case st.failure != "":
		return fmt.Errorf("visit: the server failed the stream: %s", st.c.secrets.Redact(st.failure))
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %w", errCut, err)
	case !st.ended:
		return errCut
	case st.done:
		st.s.tokenRead("")
		st.s.progressed()
		if !st.flush() {
			return errStopped
		}
	}
	return nil
}
