package feed

import (
	"bytes"
	"fmt"
	"io"
)

// Limits of one operation in a feed.
const (
	// maxOpBytes bounds the JSON text of one operation. A longer one is
	// reported and skipped; the scan goes on without keeping its bytes.
	maxOpBytes = 64 << 20
	// maxDepth bounds the nesting of arrays and objects, as encoding/json
	// does.
	maxDepth = 10000
)

// inputPos is a place in a feed: a byte offset and its line, for
// messages that say where a user can feed on from.
type inputPos struct {
	line int
	off  int64
	mid  bool // something before it on the same line was read
}

// String names p by its line where nothing on the line before it was
// read, and by its byte offset otherwise.
func (p inputPos) String() string {
	if p.mid {
		return fmt.Sprintf("byte offset %d (on line %d)", p.off, p.line)
	}
	return fmt.Sprintf("line %d", p.line)
}

// syntaxError is input that is not a stream of JSON objects, or not one
// JSON array of them. Nothing can be read after it: where the broken value
// ends is unknown.
type syntaxError struct {
	line int      // where the error was found
	from inputPos // the first byte not read on: the start of the broken value
	msg  string
}

func (e *syntaxError) Error() string {
	if e.from.line != e.line {
		return fmt.Sprintf("line %d: invalid JSON: %s (in the operation from line %d)", e.line, e.msg, e.from.line)
	}
	return fmt.Sprintf("line %d: invalid JSON: %s", e.line, e.msg)
}

// errTooLarge is a complete, well-formed operation over maxOpBytes.
var errTooLarge = fmt.Errorf("operation larger than %d MiB", maxOpBytes>>20)

// Scanner states: what the next byte may be.
type scanState uint8

const (
	stValue        scanState = iota // a value: after ':' or after ',' in an array
	stValueOrClose                  // a value or ']': after '['
	stKeyOrClose                    // a key or '}': after '{'
	stKey                           // a key: after ',' in an object
	stColon                         // ':' after a key
	stCommaOrClose                  // ',' or the container's end, after a value
	stString                        // inside a string
	stEscape                        // after '\' in a string
	stHex                           // in the hex digits of \uXXXX
	stMinus                         // after a number's '-'
	stZero                          // a number's leading 0
	stInt                           // a number's integer digits
	stDot                           // after a number's '.'
	stFrac                          // a number's fraction digits
	stE                             // after a number's 'e' or 'E'
	stESign                         // after the exponent's sign
	stExp                           // a number's exponent digits
	stLiteral                       // inside true, false or null
	stDone                          // the object is complete
)

// Framing: where the scanner is in the feed as a whole.
const (
	frameStart   = iota // nothing read yet
	frameLines          // in a stream of objects
	frameOpen           // after the array's '['
	frameComma          // after a ',' in the array
	frameElement        // after an element of the array
	frameEnd            // after the array's ']'
)

// objectScanner splits a feed into the JSON text of its operations: a
// stream of objects (one a line, or over several lines), or one array of
// them, told apart by the first character that is not white space. A UTF-8
// byte order mark at the very start is skipped.
//
// It checks the syntax of RFC 8259 strictly, byte by byte, and stops at the
// first error, since where a broken value ends cannot be known. It does not
// check UTF-8: an operation with invalid UTF-8 is still well framed, and
// parseOp rejects it. It keeps the bytes of one operation and a 64 KiB
// window of input, whatever the size of the feed.
type objectScanner struct {
	r    io.Reader
	win  []byte // the window: win[pos:end] is not scanned yet
	pos  int
	end  int
	rerr error // the error of the last Read, returned once win is used up
	line int   // the line of win[pos]
	off  int64 // the input offset of win[0]

	frame       int
	err         error // sticky: a *syntaxError or a read error
	contentLine int   // the line of the last byte read that is not white space

	// Where the last value returned starts, and where the input after it
	// starts: past the white space that ends its line.
	start, after inputPos

	// The value being scanned.
	inValue bool   // scanning a value
	val     []byte // its bytes so far, before win[begin:pos]
	begin   int    // where the value's unsaved bytes start in win
	tooBig  bool   // more than maxOpBytes: the bytes are no longer kept
	state   scanState
	inKey   bool   // the string is an object key
	stack   []byte // the open containers, '{' or '['
	hex     int    // hex digits still to come in \uXXXX
	lit     string // the rest of a literal still to come
}

func newObjectScanner(r io.Reader) *objectScanner {
	return &objectScanner{r: r, win: make([]byte, 64<<10), line: 1}
}

// next returns the JSON text of the next operation, valid until the next
// call; s.start and s.after say where it is. The error is io.EOF at the
// end of the input, errTooLarge for an operation that is skipped (call
// next again), or a *syntaxError or read error after which nothing more is
// read (s.unread says from where).
func (s *objectScanner) next() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	obj, err := s.frameNext()
	if err != nil && err != errTooLarge {
		s.err = err
		return nil, err
	}
	s.contentLine = s.line
	s.finishLine()
	s.after = s.here()
	return obj, err
}

// finishLine reads past the white space after a value up to the end of its
// line, so that s.after names the next line when the value ends its line.
// On a pipe it may wait for the rest of the line, which a writer of JSON
// lines sends with the value.
func (s *objectScanner) finishLine() {
	for {
		for s.pos < s.end {
			switch s.win[s.pos] {
			case ' ', '\t', '\r':
				s.pos++
			case '\n':
				s.pos++
				s.line++
				return
			default:
				return
			}
		}
		if s.fill() != nil {
			return
		}
	}
}

// here is the position of win[pos].
func (s *objectScanner) here() inputPos {
	return inputPos{line: s.line, off: s.off + int64(s.pos), mid: s.contentLine == s.line}
}

// unread is where the input was not read from, after next returned an
// error other than errTooLarge: the start of the value being scanned, or
// the current position between values.
func (s *objectScanner) unread() inputPos {
	if s.inValue {
		return s.start
	}
	return s.here()
}

// rest returns the input from unread on, byte for byte, after next
// returned a *syntaxError: the broken value and all after it. It returns
// nil when the value's first bytes are no longer kept (it was over
// maxOpBytes).
func (s *objectScanner) rest() io.Reader {
	var head []byte
	switch {
	case s.inValue && s.tooBig:
		return nil
	case s.inValue:
		head = append(s.val[:len(s.val):len(s.val)], s.win[s.begin:s.end]...)
	default:
		head = s.win[s.pos:s.end]
	}
	if s.rerr != nil { // the input ended, or cannot be read on
		return bytes.NewReader(head)
	}
	return io.MultiReader(bytes.NewReader(head), s.r)
}

// frameNext finds the next operation's start in the feed's framing (a
// stream of objects, or one array of them) and scans it; a case per place
// in that framing.
func (s *objectScanner) frameNext() ([]byte, error) {
	for {
		c, err := s.peekNonSpace()
		if err == io.EOF && (s.frame == frameOpen || s.frame == frameComma || s.frame == frameElement) {
			return nil, s.syntax("unexpected end of input in the array: want ']'")
		}
		if err != nil {
			return nil, err
		}
		switch s.frame {
		case frameStart:
			s.frame = frameLines
			if c == '[' {
				s.pos++
				s.frame, s.contentLine = frameOpen, s.line
			}
			continue
		case frameOpen:
			if c == ']' {
				s.pos++
				s.frame, s.contentLine = frameEnd, s.line
				continue
			}
		case frameComma:
			if c == ']' {
				return nil, s.syntax("']' after ',': want an operation")
			}
		case frameElement:
			switch c {
			case ',':
				s.pos++
				s.frame, s.contentLine = frameComma, s.line
				continue
			case ']':
				s.pos++
				s.frame, s.contentLine = frameEnd, s.line
				continue
			}
			return nil, s.syntax(quoteChar(c) + " after an operation in the array: want ',' or ']'")
		case frameEnd:
			return nil, s.syntax(quoteChar(c) + " after the end of the array")
		}
		// An operation starts here.
		if c != '{' {
			return nil, s.syntax(quoteChar(c) + " where an operation (a JSON object) should start")
		}
		if s.frame != frameLines {
			s.frame = frameElement
		}
		return s.scanObject()
	}
}

// syntax returns a *syntaxError on the current line.
func (s *objectScanner) syntax(msg string) error {
	return &syntaxError{line: s.line, from: s.unread(), msg: msg}
}

// peekNonSpace skips white space and returns the next byte, unread.
func (s *objectScanner) peekNonSpace() (byte, error) {
	for {
		for s.pos < s.end {
			switch c := s.win[s.pos]; c {
			case '\n':
				s.line++
				fallthrough
			case ' ', '\t', '\r':
				s.pos++
			default:
				return c, nil
			}
		}
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
}

// fill reads more input into the window once it is used up. At the start
// of the input it skips a byte order mark.
func (s *objectScanner) fill() error {
	if s.rerr != nil {
		return s.rerr
	}
	first := s.off == 0 && s.end == 0
	s.off += int64(s.end)
	s.pos, s.end, s.begin = 0, 0, 0
	for empty := 0; s.end == 0 || (first && s.end < 3); {
		n, err := s.r.Read(s.win[s.end:])
		s.end += n
		if err == nil && n == 0 {
			if empty++; empty == 100 { // as bufio gives up
				err = io.ErrNoProgress
			}
		}
		if err != nil {
			s.rerr = err
			if err != io.EOF {
				s.rerr = fmt.Errorf("line %d: reading the input: %w", s.line, err)
			}
			break
		}
	}
	if first && s.end >= 3 && s.win[0] == 0xEF && s.win[1] == 0xBB && s.win[2] == 0xBF {
		s.pos = 3
	}
	if s.pos == s.end {
		return s.rerr
	}
	return nil
}

// scanObject scans the object that starts at win[pos] and returns its text.
func (s *objectScanner) scanObject() ([]byte, error) {
	s.val, s.tooBig, s.inValue = s.val[:0], false, true
	s.start = s.here()
	s.begin = s.pos
	s.stack = append(s.stack[:0], '{')
	s.state = stKeyOrClose
	s.pos++
	for {
		if err := s.scan(); err != nil {
			return nil, err
		}
		if s.state == stDone {
			break
		}
		s.save()
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return nil, s.syntax("unexpected end of input inside an operation")
			}
			return nil, err
		}
	}
	s.save()
	s.inValue = false
	if s.tooBig {
		return nil, errTooLarge
	}
	return s.val, nil
}

// save moves the scanned bytes of the value from the window to val.
func (s *objectScanner) save() {
	if !s.tooBig && len(s.val)+s.pos-s.begin > maxOpBytes {
		s.tooBig, s.val = true, s.val[:0]
	}
	if !s.tooBig {
		s.val = append(s.val, s.win[s.begin:s.pos]...)
	}
	s.begin = s.pos
}

// scan advances through the window until the value is done, the window is
// used up, or the syntax is broken. It is long and branchy because it is a
// state machine, a case per state of RFC 8259's grammar, kept in one loop
// so that the byte at hand is looked at once.
func (s *objectScanner) scan() error {
	for s.pos < s.end {
		c := s.win[s.pos]
		switch s.state {
		case stString:
			// The common case: plain characters up to the closing quote.
			i := s.pos
			for ; i < s.end; i++ {
				if c = s.win[i]; c < 0x20 || c == '"' || c == '\\' {
					break
				}
			}
			if s.pos = i; i == s.end {
				return nil
			}
			switch {
			case c == '"':
				s.state = stCommaOrClose
				if s.inKey {
					s.state = stColon
				}
			case c == '\\':
				s.state = stEscape
			case c == '\n':
				return s.syntax("a line break inside a string")
			default:
				return s.syntax(fmt.Sprintf("control character %#02x inside a string", c))
			}
		case stEscape, stHex:
			if err := s.escape(c); err != nil {
				return err
			}
		case stLiteral:
			if c != s.lit[0] {
				return s.syntax(fmt.Sprintf("%s in a literal: want %q", quoteChar(c), s.lit[0]))
			}
			if s.lit = s.lit[1:]; s.lit == "" {
				s.state = stCommaOrClose
			}
		case stMinus, stZero, stInt, stDot, stFrac, stE, stESign, stExp:
			next, ok := numberStep(s.state, c)
			if !ok {
				if !numberComplete(s.state) {
					return s.syntax(fmt.Sprintf("%s in a number", quoteChar(c)))
				}
				s.state = stCommaOrClose
				continue // c is not part of the number: look at it again
			}
			s.state = next
		default:
			if err := s.structural(c); err != nil || s.state == stDone {
				return err
			}
			continue // structural advanced pos itself
		}
		s.pos++
	}
	return nil
}

// escape takes c in a string's escape: after the backslash (stEscape), or
// one of a \u escape's four hex digits (stHex).
func (s *objectScanner) escape(c byte) error {
	if s.state == stHex {
		if !isHex(c) {
			return s.syntax(fmt.Sprintf("%s in a \\u escape: want a hex digit", quoteChar(c)))
		}
		if s.hex--; s.hex == 0 {
			s.state = stString
		}
		return nil
	}
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.state = stString
	case 'u':
		s.state, s.hex = stHex, 4
	default:
		return s.syntax(fmt.Sprintf("invalid escape '\\%c' in a string", c))
	}
	return nil
}

// structural handles c in a state between tokens, advancing pos past it:
// one case per token that may come there, as the grammar has it.
func (s *objectScanner) structural(c byte) error {
	switch c {
	case '\n':
		s.line++
		fallthrough
	case ' ', '\t', '\r':
		s.pos++
		return nil
	}
	s.pos++
	switch s.state {
	case stColon:
		if c == ':' {
			s.state = stValue
			return nil
		}
		return s.syntax(quoteChar(c) + " after an object key: want ':'")
	case stKeyOrClose, stKey:
		switch {
		case c == '"':
			s.state, s.inKey = stString, true
			return nil
		case c == '}' && s.state == stKeyOrClose:
			return s.close()
		}
		return s.syntax(fmt.Sprintf("%s where an object key should start", quoteChar(c)))
	case stCommaOrClose:
		return s.afterValue(c)
	}
	return s.valueStart(c) // stValue or stValueOrClose
}

// afterValue handles c after a value: a comma or the container's close.
func (s *objectScanner) afterValue(c byte) error {
	top := s.stack[len(s.stack)-1]
	switch {
	case c == ',' && top == '{':
		s.state = stKey
		return nil
	case c == ',':
		s.state = stValue
		return nil
	case c == '}' && top == '{', c == ']' && top == '[':
		return s.close()
	}
	want := "',' or '}'"
	if top == '[' {
		want = "',' or ']'"
	}
	return s.syntax(fmt.Sprintf("%s after a value: want %s", quoteChar(c), want))
}

// valueStart handles c where a value starts (or, in an array, its close).
func (s *objectScanner) valueStart(c byte) error {
	s.inKey = false
	switch {
	case c == ']' && s.state == stValueOrClose:
		return s.close()
	case c == '"':
		s.state = stString
	case c == '{' || c == '[':
		if len(s.stack) >= maxDepth {
			return s.syntax(fmt.Sprintf("nested deeper than %d", maxDepth))
		}
		s.stack = append(s.stack, c)
		s.state = stKeyOrClose
		if c == '[' {
			s.state = stValueOrClose
		}
	case c == '-':
		s.state = stMinus
	case c == '0':
		s.state = stZero
	case '1' <= c && c <= '9':
		s.state = stInt
	case c == 't':
		s.state, s.lit = stLiteral, "rue"
	case c == 'f':
		s.state, s.lit = stLiteral, "alse"
	case c == 'n':
		s.state, s.lit = stLiteral, "ull"
	default:
		return s.syntax(fmt.Sprintf("%s where a value should start", quoteChar(c)))
	}
	return nil
}

// close ends the innermost container.
func (s *objectScanner) close() error {
	s.stack = s.stack[:len(s.stack)-1]
	s.state = stCommaOrClose
	if len(s.stack) == 0 {
		s.state = stDone
	}
	return nil
}

// numberStep is the state after c in a number, as RFC 8259's grammar has
// it: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func numberStep(st scanState, c byte) (scanState, bool) {
	digit := '0' <= c && c <= '9'
	switch st {
	case stMinus:
		if c == '0' {
			return stZero, true
		}
		if digit {
			return stInt, true
		}
	case stInt:
		if digit {
			return stInt, true
		}
		fallthrough
	case stZero:
		if c == '.' {
			return stDot, true
		}
		if c == 'e' || c == 'E' {
			return stE, true
		}
	case stDot, stFrac:
		if digit {
			return stFrac, true
		}
		if st == stFrac && (c == 'e' || c == 'E') {
			return stE, true
		}
	case stE:
		if c == '+' || c == '-' {
			return stESign, true
		}
		fallthrough
	case stESign, stExp:
		if digit {
			return stExp, true
		}
	}
	return st, false
}

// numberComplete reports whether a number may end in state st.
func numberComplete(st scanState) bool {
	return st == stZero || st == stInt || st == stFrac || st == stExp
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// quoteChar names the byte c in a message.
func quoteChar(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte %#02x", c)
}
