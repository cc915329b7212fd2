package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/internal/jsontext"
	"github.com/seed32e55400/retries/internal/updates"
)

// Kind is what a feed operation does to its document.
type Kind int

const (
	Put    Kind = iota // POST: write the whole document
	Update             // PUT: change some fields
	Remove             // DELETE
)

// String returns the operation's name in the feed format: "put", "update"
// or "remove".
func (k Kind) String() string { return [...]string{"put", "update", "remove"}[k] }

// method is the document/v1 HTTP method of k.
func (k Kind) method() string {
	return [...]string{http.MethodPost, http.MethodPut, http.MethodDelete}[k]
}

// operation is one parsed operation of a feed, ready to send.
type operation struct {
	kind  Kind
	id    string   // the document id, as in the input
	line  int      // the input line the operation starts on
	off   int64    // and its byte offset
	after inputPos // where the input after it starts
	path  string   // the escaped document/v1 path with its query, from "/document/v1/"
	body  []byte   // nil for a remove
	text  []byte   // the operation as the input has it, to write it out again
	// safe reports whether sending the operation twice leaves the
	// document as sending it once does, so that a request whose outcome is
	// unknown (a reset connection, a proxy's 502 or 504) may be repeated.
	safe      bool
	condition string // as Operation has them
	create    bool
	// pub is the Operation it was prepared from, handed to the hooks and
	// to done as it came (see prepare); zero in a parse.
	pub        Operation
	seq        int64          // its place among the operations a feed took, from 1
	run        *run           // the Feed it is an element of; nil for a Send
	turn       chan struct{}  // a Send's: closed when its turn on the document comes (see dispatcher)
	nextUnsent *operation     // the one added before it to its run's unsent (see run.addUnsent)
	held       bool           // a Feed's whose document is held back when its turn came (see run.send)
	permit     retries.Permit // its first attempt's, taken by the Feed's dispatch (see run.dispatch); zero if none
}

// ID returns the operation's document id, as the input has it.
func (op *operation) ID() string { return op.id }

// name is how reports refer to the operation: "line 3: put id:a:b::c".
// An operation that came from no input line (an iterator's, a Send's) is
// named without one.
func (op *operation) name() string {
	if op.line <= 0 {
		return op.kind.String() + " " + op.id
	}
	return fmt.Sprintf("line %d: %s %s", op.line, op.kind, op.id)
}

// The top-level keys of an operation, each a bit of a set.
const (
	keyPut = 1 << iota
	keyUpdate
	keyRemove
	keyID // Vespa's legacy key for a put
	keyCondition
	keyCreate
	keyFields
)

// opKeys names the keys of an operation. The bits above are their indexes.
var opKeys = [...]string{"put", "update", "remove", "id", "condition", "create", "fields"}

// keyBit returns the bit of the key name, matched exactly, or 0.
func keyBit(name []byte) int {
	switch string(name) {
	case "put":
		return keyPut
	case "update":
		return keyUpdate
	case "remove":
		return keyRemove
	case "id":
		return keyID
	case "condition":
		return keyCondition
	case "create":
		return keyCreate
	case "fields":
		return keyFields
	}
	return 0
}

// opText is an operation's members as the input spells them.
type opText struct {
	seen      int    // the keys present, as key bits
	id        []byte // of "put", "id", "update" or "remove", decoded
	condition []byte // decoded
	fields    []byte // as written
	create    bool
	hasFields bool // not absent, nor null
}

// parseOp turns the JSON text of one operation, a well-formed object (see
// objectScanner), into an operation. Keys match exactly. An unknown or
// repeated key is an error rather than ignored or overwritten, so that a
// misspelt or repeated "condition" never turns a conditional write into an
// unconditional one. The fields are passed on as written.
func parseOp(obj []byte, line int) (*operation, error) {
	t, err := readMembers(obj)
	if err != nil {
		return nil, err
	}
	op := &operation{line: line, id: string(t.id)}
	switch t.seen & (keyPut | keyUpdate | keyRemove | keyID) {
	case keyPut, keyID:
		op.kind = Put
	case keyUpdate:
		op.kind = Update
	case keyRemove:
		op.kind = Remove
	default:
		return nil, errors.New(`want exactly one of "put" (or its legacy form "id"), "update" and "remove"`)
	}
	switch {
	case op.kind == Remove && t.hasFields:
		return nil, errors.New(`a remove has no "fields"`)
	case op.kind != Remove && !t.hasFields:
		return nil, fmt.Errorf(`%s without "fields"`, op.kind)
	case op.kind == Remove && t.seen&keyCreate != 0:
		return nil, errors.New(`"create" is for a put or an update, not a remove`)
	}
	docPath, err := documentPath(op.id)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if t.create {
		q.Set("create", "true")
	}
	if len(t.condition) > 0 {
		q.Set("condition", string(t.condition))
	}
	op.path = docPath
	if len(q) > 0 {
		op.path += "?" + q.Encode()
	}
	// One allocation holds the text and the body.
	buf := make([]byte, 0, len(obj)+len(`{"fields":}`)+len(t.fields))
	buf = append(buf, obj...)
	op.text = buf[:len(obj):len(obj)]
	if t.hasFields {
		op.body = append(append(append(buf[len(obj):], `{"fields":`...), t.fields...), '}')
	}
	op.condition, op.create = string(t.condition), t.create
	op.safe = true
	if op.kind == Update {
		op.safe = len(t.condition) == 0 && !repeats(t.fields)
	}
	return op, nil
}

// readMembers reads the members of an operation's object: each key once,
// matched exactly, with a value of its type.
func readMembers(obj []byte) (opText, error) {
	var t opText
	if !utf8.Valid(obj) {
		return t, errors.New("invalid UTF-8")
	}
	for m := jsontext.NewMembers(obj); ; {
		rawKey, value, ok := m.Next()
		if !ok {
			return t, nil
		}
		key, err := jsontext.Unquote(rawKey)
		if err != nil {
			return t, fmt.Errorf("key %s: %v", rawKey, err)
		}
		bit := keyBit(key)
		switch {
		case bit == 0:
			return t, unknownKey(key)
		case t.seen&bit != 0:
			return t, fmt.Errorf("duplicate key %q", key)
		}
		t.seen |= bit
		switch bit {
		case keyPut, keyUpdate, keyRemove, keyID, keyCondition:
			if value[0] != '"' {
				return t, fmt.Errorf("%q is not a string", key)
			}
			s, err := jsontext.Unquote(value)
			if err != nil {
				return t, fmt.Errorf("%q: %v", key, err)
			}
			if bit == keyCondition {
				t.condition = s
			} else {
				t.id = s
			}
		case keyCreate:
			switch string(value) {
			case "true":
				t.create = true
			case "false":
			default:
				return t, errors.New(`"create" is not true or false`)
			}
		case keyFields:
			switch value[0] {
			case '{':
				t.fields, t.hasFields = value, true
			case 'n': // null: no fields, as if the key were absent
			default:
				return t, errors.New(`"fields" is not an object`)
			}
		}
	}
}

// unknownKey is the error for a key that is not one of opKeys, with a hint
// when it differs from one only in case or by Unicode folding.
func unknownKey(key []byte) error {
	for _, k := range opKeys {
		if strings.EqualFold(string(key), k) {
			return fmt.Errorf("unknown key %q (keys are case-sensitive: %q)", key, k)
		}
	}
	return fmt.Errorf("unknown key %q", key)
}

// repeats reports whether an update's fields, which the reader found well
// formed, change a document again when applied twice (package updates'
// rule); what it cannot read counts as such.
func repeats(fields []byte) bool {
	r, _ := updates.RepeatsWellFormed(fields)
	return r
}

// documentPath maps a document id to its document/v1 path, each part
// escaped:
//
//	id:NS:TYPE::ID      → /document/v1/NS/TYPE/docid/ID
//	id:NS:TYPE:g=G:ID   → /document/v1/NS/TYPE/group/G/ID
//	id:NS:TYPE:n=N:ID   → /document/v1/NS/TYPE/number/N/ID
//
// ID is everything after the fourth colon and may hold colons itself. N is
// a signed 64-bit integer, as Vespa's parsers read it, and goes out as
// Vespa's clients send it: its 64 bits as an unsigned decimal, which is
// also how Vespa's server writes the number into the id.
func documentPath(id string) (string, error) {
	parts := strings.SplitN(id, ":", 5)
	if len(parts) != 5 || parts[0] != "id" {
		return "", fmt.Errorf("invalid document id %q: want id:NAMESPACE:TYPE::ID", id)
	}
	ns, typ, kv, user := parts[1], parts[2], parts[3], parts[4]
	if ns == "" || typ == "" || user == "" {
		return "", fmt.Errorf("invalid document id %q: empty namespace, type or id", id)
	}
	p := "/document/v1/" + pathSegment(ns) + "/" + pathSegment(typ)
	switch {
	case kv == "":
		return p + "/docid/" + pathSegment(user), nil
	case strings.HasPrefix(kv, "g=") && len(kv) > 2:
		return p + "/group/" + pathSegment(kv[2:]) + "/" + pathSegment(user), nil
	case strings.HasPrefix(kv, "n="):
		n, err := strconv.ParseInt(kv[2:], 10, 64)
		if err != nil {
			return "", fmt.Errorf("invalid document id %q: n= needs a signed 64-bit integer", id)
		}
		return p + "/number/" + strconv.FormatUint(uint64(n), 10) + "/" + pathSegment(user), nil
	}
	return "", fmt.Errorf("invalid document id %q: the part after the type must be empty, g=GROUP or n=NUMBER", id)
}

// pathSegment escapes s as one segment of a path. The segments "." and
// "..", which url.PathEscape leaves as they are, are escaped too, so that
// nothing on the way (a proxy, a client) resolves them as dot segments
// and sends the request to another path.
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// OperationError is an operation of the input that is well-formed JSON but
// not a valid operation (an unknown or repeated key, a wrong type, a bad
// document id, over 64 MiB): Read yields it and reads on.
type OperationError struct {
	Line   int   // the line the operation starts on
	Offset int64 // the byte offset it starts at
	Err    error
	after  inputPos // where the input after it starts
}

func (e *OperationError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *OperationError) Unwrap() error { return e.Err }

// InputError is input that cannot be read on: broken JSON, whose end
// cannot be known, or an error reading the input. Read yields it last.
type InputError struct {
	// Line and Offset say where the input not read starts: the start of
	// the broken value.
	Line   int
	Offset int64
	Err    error
	from   inputPos
	rest   io.Reader // the input from there on, for broken JSON; nil otherwise
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%v; the input from %v on was not read", e.Err, e.from)
}

func (e *InputError) Unwrap() error { return e.Err }

// Rest returns the input from Line and Offset on, byte for byte (the
// broken value and all after it, not read from the underlying reader
// until then), or nil when it cannot be had: after a read error, or when
// the broken value's first bytes were not kept (it was over 64 MiB).
func (e *InputError) Rest() io.Reader { return e.rest }

// opReader streams the operations of a feed, as objectScanner frames them.
type opReader struct {
	s *objectScanner
}

func newOpReader(r io.Reader) *opReader { return &opReader{s: newObjectScanner(r)} }

// next returns the next operation, a *OperationError for one that could not be
// parsed (call next again), an *InputError for input that cannot be read on,
// or io.EOF.
func (r *opReader) next() (*operation, error) {
	obj, err := r.s.next()
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err == errTooLarge:
		return nil, &OperationError{Line: r.s.start.line, Offset: r.s.start.off, after: r.s.after, Err: err}
	case err != nil:
		from := r.s.unread()
		e := &InputError{Line: from.line, Offset: from.off, Err: err, from: from}
		if errors.As(err, new(*syntaxError)) {
			e.rest = r.s.rest()
		}
		return nil, e
	}
	op, err := parseOp(obj, r.s.start.line)
	if err != nil {
		return nil, &OperationError{Line: r.s.start.line, Offset: r.s.start.off, after: r.s.after, Err: fmt.Errorf("invalid operation: %v", err)}
	}
	op.off, op.after = r.s.start.off, r.s.after
	return op, nil
}

// read yields what the reader that open returns reads, opening one for
// each iteration.
func read(open func() *opReader) iter.Seq2[Operation, error] {
	return func(yield func(Operation, error) bool) {
		rd := open()
		for {
			op, err := rd.next()
			switch {
			case err == io.EOF:
				return
			case err != nil:
				var bad *OperationError
				if !yield(Operation{}, err) || !errors.As(err, &bad) {
					return
				}
			default:
				if !yield(op.public(), nil) {
					return
				}
			}
		}
	}
}

// public returns op as an Operation, which remembers op.
func (op *operation) public() Operation {
	o := Operation{Kind: op.kind, ID: op.id, Condition: op.condition, Create: op.create, Line: op.line, Offset: op.off, read: op}
	if op.body != nil {
		o.Fields = op.body[len(`{"fields":`) : len(op.body)-1 : len(op.body)-1]
	}
	return o
}

// prepare returns o ready to send, an operation of its own: a copy of what
// Read parsed if o still says the same, or else o written in the feed
// format and parsed as Read would, so that the same rules apply to it. A
// Feed or a Send writes its own state into what prepare returns, so it is
// never the parse that o holds: the same Operation may be fed by several
// Clients at once. What the feed hands out of it (to done, to the hooks)
// is o itself, never an Operation of the operation it returns: o.read is
// only ever a parse, which no feed writes into, so an Operation fed
// again, by the same Client or another, starts afresh.
func prepare(o Operation) (*operation, error) {
	if op := o.read; op != nil && op.kind == o.Kind && op.id == o.ID && op.condition == o.Condition &&
		op.create == o.Create && op.line == o.Line && op.off == o.Offset && sameBytes(op.body, o.Fields) {
		c := *op
		c.pub = o
		return &c, nil
	}
	switch {
	case o.Kind < Put || o.Kind > Remove:
		return nil, fmt.Errorf("invalid operation: unknown kind %d", int(o.Kind))
	case !utf8.ValidString(o.ID) || !utf8.ValidString(o.Condition):
		// json.Marshal would make U+FFFD of the invalid bytes.
		return nil, errors.New("invalid operation: the id or the condition is not valid UTF-8")
	case o.Fields != nil && !json.Valid(o.Fields):
		// parseOp checks the operation's keys and values, not its syntax.
		return nil, errors.New("invalid operation: the fields are not valid JSON")
	}
	id, err := json.Marshal(o.ID)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+len(o.ID)+len(o.Condition)+len(o.Fields))
	b = append(append(append(append(b, `{"`...), o.Kind.String()...), `":`...), id...)
	if o.Condition != "" {
		c, err := json.Marshal(o.Condition)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"condition":`...), c...)
	}
	if o.Create {
		b = append(b, `,"create":true`...)
	}
	if o.Fields != nil {
		b = append(append(b, `,"fields":`...), o.Fields...)
	}
	b = append(b, '}')
	op, err := parseOp(b, o.Line)
	if err != nil {
		return nil, fmt.Errorf("invalid operation: %v", err)
	}
	op.off, op.pub = o.Offset, o
	return op, nil
}

// sameBytes reports whether a body holds exactly fields, as public made it.
func sameBytes(body []byte, fields json.RawMessage) bool {
	if body == nil || fields == nil {
		return body == nil && fields == nil
	}
	n := len(body) - len(`{"fields":}`)
	return len(fields) == n && n > 0 && &fields[0] == &body[len(`{"fields":`)]
}
