package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"unicode/utf8"
)

// Operation is one operation of a feed: a put, an update or a remove of
// one document.
type Operation struct {
	Kind Kind
	// ID is the document id: id:NAMESPACE:TYPE::KEY, or with g=GROUP or
	// n=NUMBER between the last two colons.
	ID string
	// Fields is the fields object of a put or an update, sent byte for
	// byte; nil for a remove.
	Fields json.RawMessage
	// Condition is a test-and-set condition; "" for none.
	Condition string
	// Create makes a put or an update create the document if it is
	// missing.
	Create bool
	// Line and Offset are the input line and byte offset the operation
	// starts at, when Read read it; 0 otherwise.
	Line   int
	Offset int64
	// Tag is the caller's own (a row id, a Kafka offset), handed back to
	// Feed's done untouched.
	Tag any

	read *operation // what Read parsed, reused while the fields above still say the same
}

// Read returns the operations of the feed r holds, in Vespa's feed format,
// as the strict reader of the feed command reads them: a stream of JSON
// objects or one JSON array of them, each key exact and once, each id
// valid. It reads r as the iteration goes, holding a 64 KiB window and one
// operation.
//
// An operation that is not valid yields an *OperationError with its line,
// and the reading goes on. Broken JSON, whose end cannot be known, and an
// error reading r yield an *InputError saying where the input not read
// starts, and the iteration ends.
func Read(r io.Reader) iter.Seq2[Operation, error] {
	return read(func() *opReader { return newOpReader(r) })
}

// ReadFrom is Read for an input taken up part way, such as a feed resumed
// after a crash: r holds the input from the start of one of its elements
// on, which is at offset and line in the whole input, and array says
// whether the input is one JSON array (its first byte that is not white
// space is '['). The positions of what it yields, its errors' included,
// are those of the whole input. ReadFrom panics if offset is negative or
// line is below 1.
func ReadFrom(r io.Reader, offset int64, line int, array bool) iter.Seq2[Operation, error] {
	if offset < 0 || line < 1 {
		panic("feed: ReadFrom: negative offset or line below 1")
	}
	return read(func() *opReader {
		rd := newOpReader(r)
		rd.s.off, rd.s.line, rd.s.frame = offset, line, frameLines
		if array {
			rd.s.frame = frameComma
		}
		return rd
	})
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
	o := Operation{Kind: op.kind, ID: op.id, Condition: op.condition, Create: op.create, Line: op.line, Offset: op.off, Tag: op.tag, read: op}
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
		c.tag, c.pub = o.Tag, o
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
	op.off, op.tag, op.pub = o.Offset, o.Tag, o
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
