package feed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzReadFeed reads arbitrary input as a feed and checks that every byte
// is accounted for: each operation is an exact, well-formed object of the
// input, starting on the line reported; between them there are only
// white space and the array's punctuation; and the reading ends at the
// end of the input exactly when encoding/json finds the input a valid
// feed, or else names where the unread input starts.
func FuzzReadFeed(f *testing.F) {
	for _, s := range []string{
		threeOps, multiLine, "[" + put1 + ",\n" + put2 + "]", "\xEF\xBB\xBF" + put1,
		put1 + put2, `{"update": "id:a:b::1", "condition": "a", "condition": "", "fields": {"n": {"increment": 1}}}`,
		`{"put": "id:a:b::\ud800", "fields": {}}`, "[" + put1 + "] x", `{"put": "id:a:b::1", "fields": {"x": [1, -0.5e+3, true, null, "\u00e9"]}}`,
		"{\"put\": \"id:a:b::1\",\n \"fields\": {\"x\":\n" + put2 + "\n}}", `{"remove": "id:a:b:n=-1:."}`, "[]", "[,]", "{", "\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		oneByte := len(in)%2 == 1 // also split the reads, on half the inputs
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		s := newObjectScanner(r)
		done := int64(0) // the input before this is accounted for
		if bytes.HasPrefix(in, []byte("\xEF\xBB\xBF")) {
			done = 3
		}
		for {
			obj, err := s.next()
			if err == io.EOF {
				checkSeparators(t, in, done, int64(len(in)))
				if !validFeed(in) {
					t.Fatalf("read to the end of %q, which encoding/json rejects", in)
				}
				return
			}
			if err != nil {
				var se *syntaxError
				if !errors.As(err, &se) {
					t.Fatalf("next() = %v, want a syntax error", err)
				}
				from := s.unread()
				checkSeparators(t, in, done, from.off)
				checkLine(t, in, from)
				if validFeed(in) {
					t.Fatalf("next() = %v on %q, which encoding/json accepts", err, in)
				}
				if _, again := s.next(); again != err {
					t.Fatalf("next() after %v = %v, want the same error", err, again)
				}
				return
			}
			start := s.start
			checkSeparators(t, in, done, start.off)
			checkLine(t, in, start)
			end := start.off + int64(len(obj))
			if end > int64(len(in)) || !bytes.Equal(in[start.off:end], obj) || obj[0] != '{' || !json.Valid(obj) {
				t.Fatalf("next() = %q at offset %d, not a JSON object of the input %q", obj, start.off, in)
			}
			if s.after.off < end || !bytes.Equal(bytes.Trim(in[end:s.after.off], " \t\r\n"), nil) {
				t.Fatalf("the input after %q starts at %d, want %d or past white space after it", obj, s.after.off, end)
			}
			checkLine(t, in, s.after)
			done = end
			// An operation sends only what its object holds.
			op, perr := parseOp(obj, start.line)
			if perr == nil {
				if op.line != start.line {
					t.Fatalf("operation line %d, want %d", op.line, start.line)
				}
				if op.body != nil && !bytes.Contains(obj, op.body[len(`{"fields":`):len(op.body)-1]) {
					t.Fatalf("body %q is not the fields of %q", op.body, obj)
				}
			}
		}
	})
}

// checkSeparators fails unless in[from:to] holds only white space and the
// punctuation of an array.
func checkSeparators(t *testing.T, in []byte, from, to int64) {
	t.Helper()
	if to < from || to > int64(len(in)) {
		t.Fatalf("accounted to offset %d, then on from %d, of %d bytes", from, to, len(in))
	}
	if rest := bytes.Trim(in[from:to], " \t\r\n[],"); len(rest) > 0 {
		t.Fatalf("input %q at offsets %d to %d was skipped", in[from:to], from, to)
	}
}

// checkLine fails unless p's line is the line of its offset, and p.mid
// says whether anything but white space precedes it on that line.
func checkLine(t *testing.T, in []byte, p inputPos) {
	t.Helper()
	before := in[:p.off]
	if line := 1 + bytes.Count(before, []byte("\n")); p.line != line {
		t.Fatalf("position %+v: offset %d is on line %d", p, p.off, line)
	}
	lineStart := before[bytes.LastIndexByte(before, '\n')+1:]
	lineStart = bytes.TrimPrefix(lineStart, []byte("\xEF\xBB\xBF"))
	if mid := len(bytes.Trim(lineStart, " \t\r")) > 0; mid != p.mid {
		t.Fatalf("position %+v: %q precedes it on its line", p, lineStart)
	}
}

// validFeed reports whether encoding/json reads in as a feed: after an
// optional byte order mark, a stream of objects or one array of objects.
func validFeed(in []byte) bool {
	in = bytes.TrimPrefix(in, []byte("\xEF\xBB\xBF"))
	dec := json.NewDecoder(bytes.NewReader(in))
	if t := bytes.TrimLeft(in, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var elems []json.RawMessage
		if dec.Decode(&elems) != nil {
			return false
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return false
		}
		for _, e := range elems {
			if e[0] != '{' {
				return false
			}
		}
		return true
	}
	for {
		var v json.RawMessage
		switch err := dec.Decode(&v); {
		case err == io.EOF:
			return true
		case err != nil || v[0] != '{':
			return false
		}
	}
}
