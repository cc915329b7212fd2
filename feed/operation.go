package feed

import (
	"encoding/json"
	"io"
	"iter"

	"github.com/seed32e55400/retries/internal/updates"
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

// SafeToRepeat reports whether applying o twice is as applying it once,
// so that a request of it that may have been applied can be sent again: a
// put and a remove are; an update is when it has no condition and each of
// its field operations only assigns or removes (a match by its own
// operation), the rule by which visit.SafeToRepeat judges an update of
// every document a selection matches. An operation not safe to repeat is
// never sent again once a request of it may have been applied: a Feed or a
// Send ends it with an unknown outcome instead (Error.Unknown).
func (o Operation) SafeToRepeat() bool {
	if o.Kind != Update {
		return true
	}
	repeats, _ := updates.Repeats(o.Fields)
	return o.Condition == "" && !repeats
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
