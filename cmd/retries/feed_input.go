package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// opKind is what a feed operation does to its document.
type opKind int

const (
	opPut    opKind = iota // POST: write the whole document
	opUpdate               // PUT: change some fields
	opRemove               // DELETE
)

func (k opKind) String() string { return [...]string{"put", "update", "remove"}[k] }

// method is the document/v1 HTTP method of k.
func (k opKind) method() string {
	return [...]string{http.MethodPost, http.MethodPut, http.MethodDelete}[k]
}

// operation is one parsed operation of a feed, ready to send.
type operation struct {
	kind opKind
	id   string // the document id, as in the input
	line int    // the input line the operation starts on
	path string // the escaped document/v1 path with its query, from "/document/v1/"
	body []byte // nil for a remove
	// safe reports whether sending the operation twice leaves the
	// document as sending it once does, so that a request whose outcome is
	// unknown (a reset connection, a proxy's 502 or 504) may be repeated.
	safe bool
}

// name is how reports refer to the operation: "line 3: put id:a:b::c".
func (op *operation) name() string {
	return fmt.Sprintf("line %d: %s %s", op.line, op.kind, op.id)
}

// rawOp is an operation as the feed format spells it.
type rawOp struct {
	Put       *string         `json:"put"`
	Update    *string         `json:"update"`
	Remove    *string         `json:"remove"`
	Fields    json.RawMessage `json:"fields"`
	Create    *bool           `json:"create"`
	Condition *string         `json:"condition"`
}

// parseOp turns one JSON object of the feed into an operation. Unknown keys
// are an error rather than ignored: a misspelt "condition" must not turn a
// conditional update into an unconditional one.
func parseOp(data []byte, line int) (*operation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r rawOp
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("invalid operation: %v", err)
	}
	if dec.More() {
		return nil, errors.New("invalid operation: more than one JSON value")
	}
	op := &operation{line: line}
	n := 0
	for _, c := range []struct {
		kind opKind
		id   *string
	}{{opPut, r.Put}, {opUpdate, r.Update}, {opRemove, r.Remove}} {
		if c.id != nil {
			op.kind, op.id = c.kind, *c.id
			n++
		}
	}
	if n != 1 {
		return nil, errors.New(`invalid operation: want exactly one of "put", "update" and "remove"`)
	}
	docPath, err := documentPath(op.id)
	if err != nil {
		return nil, err
	}
	hasFields := len(r.Fields) > 0 && !bytes.Equal(r.Fields, []byte("null"))
	if hasFields && (len(bytes.TrimSpace(r.Fields)) == 0 || bytes.TrimSpace(r.Fields)[0] != '{') {
		return nil, errors.New(`invalid operation: "fields" is not an object`)
	}
	switch {
	case op.kind == opRemove && hasFields:
		return nil, errors.New(`invalid operation: a remove has no "fields"`)
	case op.kind != opRemove && !hasFields:
		return nil, fmt.Errorf(`invalid operation: %s without "fields"`, op.kind)
	case r.Create != nil && op.kind != opUpdate:
		return nil, errors.New(`invalid operation: "create" is only for an update`)
	}
	q := url.Values{}
	if r.Create != nil && *r.Create {
		q.Set("create", "true")
	}
	if r.Condition != nil && *r.Condition != "" {
		q.Set("condition", *r.Condition)
	}
	op.path = docPath
	if len(q) > 0 {
		op.path += "?" + q.Encode()
	}
	if hasFields {
		op.body = append(append([]byte(`{"fields":`), r.Fields...), '}')
	}
	op.safe = true
	if op.kind == opUpdate {
		op.safe = (r.Condition == nil || *r.Condition == "") && !repeatChanges(r.Fields)
	}
	return op, nil
}

// unsafeUpdates are the update operations whose effect depends on the
// document's current value, so that applying one twice differs from
// applying it once: arithmetic, appending to an array, and tensor "modify"
// (which may add or multiply cells).
var unsafeUpdates = map[string]bool{
	"increment": true, "decrement": true, "multiply": true, "divide": true,
	"add": true, "modify": true,
}

// repeatChanges reports whether an update's fields hold an operation that
// changes the document again when repeated. Anything it cannot read counts
// as such.
func repeatChanges(fields json.RawMessage) bool {
	var byField map[string]json.RawMessage
	if json.Unmarshal(fields, &byField) != nil {
		return true
	}
	for _, f := range byField {
		var ops map[string]json.RawMessage
		if json.Unmarshal(f, &ops) != nil {
			return true
		}
		for name, arg := range ops {
			if unsafeUpdates[name] {
				return true
			}
			if name == "match" { // {"match": {"element": k, "increment": 1}}
				var m map[string]json.RawMessage
				if json.Unmarshal(arg, &m) != nil {
					return true
				}
				for k := range m {
					if unsafeUpdates[k] {
						return true
					}
				}
			}
		}
	}
	return false
}

// documentPath maps a document id to its document/v1 path, each part
// escaped:
//
//	id:NS:TYPE::ID      → /document/v1/NS/TYPE/docid/ID
//	id:NS:TYPE:g=G:ID   → /document/v1/NS/TYPE/group/G/ID
//	id:NS:TYPE:n=N:ID   → /document/v1/NS/TYPE/number/N/ID
//
// ID is everything after the fourth colon and may hold colons itself.
func documentPath(id string) (string, error) {
	parts := strings.SplitN(id, ":", 5)
	if len(parts) != 5 || parts[0] != "id" {
		return "", fmt.Errorf("invalid document id %q: want id:NAMESPACE:TYPE::ID", id)
	}
	ns, typ, kv, user := parts[1], parts[2], parts[3], parts[4]
	if ns == "" || typ == "" || user == "" {
		return "", fmt.Errorf("invalid document id %q: empty namespace, type or id", id)
	}
	e := url.PathEscape
	p := "/document/v1/" + e(ns) + "/" + e(typ)
	switch {
	case kv == "":
		return p + "/docid/" + e(user), nil
	case strings.HasPrefix(kv, "g=") && len(kv) > 2:
		return p + "/group/" + e(kv[2:]) + "/" + e(user), nil
	case strings.HasPrefix(kv, "n="):
		if _, err := strconv.ParseUint(kv[2:], 10, 64); err != nil {
			return "", fmt.Errorf("invalid document id %q: n= needs a number", id)
		}
		return p + "/number/" + kv[2:] + "/" + e(user), nil
	}
	return "", fmt.Errorf("invalid document id %q: the part after the type must be empty, g=GROUP or n=NUMBER", id)
}

// badInput is an operation of the feed that could not be parsed; reading
// goes on with the next one.
type badInput struct {
	line int
	err  error
}

func (e *badInput) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }

// inputError is input that cannot be read on: the rest of the feed is
// not read.
type inputError struct {
	line int
	err  error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("line %d: %v; the rest of the input was not read", e.line, e.err)
}

// opReader streams the operations of a feed: JSON lines, or one JSON array,
// told apart by the first character that is not white space. It never holds
// more than one operation (and the decoder's buffer) in memory.
type opReader struct {
	lr    *lineReader
	br    *bufio.Reader
	dec   *json.Decoder // for an array; nil for JSON lines
	start bool
	done  bool
	line  int // JSON lines: the line last read
}

func newOpReader(r io.Reader) *opReader {
	lr := &lineReader{r: r}
	return &opReader{lr: lr, br: bufio.NewReaderSize(lr, 64<<10)}
}

// next returns the next operation, a *badInput for one that could not be
// parsed (call next again), an *inputError for input that cannot be read on,
// or io.EOF.
func (r *opReader) next() (*operation, error) {
	if r.done {
		return nil, io.EOF
	}
	if !r.start {
		r.start = true
		if err := r.detect(); err != nil {
			return nil, err
		}
	}
	if r.dec != nil {
		return r.nextElement()
	}
	return r.nextLine()
}

// detect looks at the first character that is not white space.
func (r *opReader) detect() error {
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			r.done = true
			if err == io.EOF {
				return io.EOF
			}
			return &inputError{line: 1, err: err}
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			if b == '\n' {
				r.line++
			}
			continue
		}
		if err := r.br.UnreadByte(); err != nil {
			return &inputError{line: r.line + 1, err: err}
		}
		if b == '[' {
			// The decoder reads from the buffered reader; offsets count
			// from the '['.
			r.lr.base, r.lr.lines = r.lr.read-int64(r.br.Buffered()), r.line
			r.lr.lineAt(0) // forget the newlines before the '['
			r.lr.lines = r.line
			r.dec = json.NewDecoder(r.br)
			if _, err := r.dec.Token(); err != nil {
				r.done = true
				return &inputError{line: r.line + 1, err: err}
			}
			return nil
		}
		// JSON lines count their own lines.
		r.lr.off, r.lr.pending = true, nil
		return nil
	}
}

// nextLine reads the next non-blank line.
func (r *opReader) nextLine() (*operation, error) {
	for {
		data, err := r.br.ReadBytes('\n')
		if len(data) == 0 && err != nil {
			r.done = true
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, &inputError{line: r.line + 1, err: err}
		}
		r.line++
		if err != nil && err != io.EOF {
			r.done = true
			return nil, &inputError{line: r.line, err: err}
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			continue
		}
		op, perr := parseOp(data, r.line)
		if perr != nil {
			return nil, &badInput{line: r.line, err: perr}
		}
		return op, nil
	}
}

// nextElement decodes the next element of the array.
func (r *opReader) nextElement() (*operation, error) {
	if !r.dec.More() {
		r.done = true
		tok, err := r.dec.Token()
		if err != nil || tok != json.Delim(']') {
			return nil, &inputError{line: r.lineAt(r.dec.InputOffset()), err: fmt.Errorf("unterminated JSON array: %v", err)}
		}
		return nil, io.EOF
	}
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		r.done = true
		off := r.dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return nil, &inputError{line: r.lineAt(off), err: fmt.Errorf("invalid JSON: %v", err)}
	}
	// The element ends at InputOffset; it starts on the line of its first
	// character, which is the line of its end less its own newlines.
	line := r.lineAt(r.dec.InputOffset()) - bytes.Count(raw, []byte("\n"))
	op, err := parseOp(raw, line)
	if err != nil {
		return nil, &badInput{line: line, err: err}
	}
	return op, nil
}

// lineAt returns the line number of the byte at offset off of the array.
func (r *opReader) lineAt(off int64) int { return r.lr.lineAt(off) + 1 }

// lineReader counts the newlines of what it reads, so that a position of
// the JSON decoder, which reads ahead, can be turned into a line number.
// It keeps only the positions of newlines not yet asked about.
type lineReader struct {
	r       io.Reader
	read    int64   // bytes read so far
	base    int64   // the position that offset 0 refers to
	lines   int     // newlines before the oldest pending one
	pending []int64 // positions of newlines read but not yet passed
	off     bool    // stop keeping positions
}

func (l *lineReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		if l.off {
			break
		}
		if b == '\n' {
			l.pending = append(l.pending, l.read+int64(i))
		}
	}
	l.read += int64(n)
	return n, err
}

// lineAt returns the number of newlines before offset off (counted from
// base). Offsets must not decrease from call to call.
func (l *lineReader) lineAt(off int64) int {
	pos := l.base + off
	i := 0
	for i < len(l.pending) && l.pending[i] < pos {
		i++
	}
	l.lines += i
	l.pending = l.pending[i:]
	return l.lines
}
