// Package updates holds the one rule of what a Vespa partial update does
// when it is applied twice, for the packages that must not apply one twice:
// feed (an operation of a file or a stream) and visit (an update of every
// document a selection matches).
package updates

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seed32e55400/retries/internal/jsontext"
)

// repeating maps each field operation of Vespa's update JSON to whether
// applying it a second time changes the document again: arithmetic,
// appending (add: to an array it appends again; the field's type is not
// known here), and a tensor's modify (which may add or multiply cells) do;
// assign and remove (what is gone stays gone) do not; match's own
// operation decides (the element's update: {"match": {"element": k,
// "increment": 1}}).
var repeating = map[string]bool{
	"assign": false, "remove": false,
	"add": true, "increment": true, "decrement": true, "multiply": true, "divide": true, "modify": true,
	"match": false,
}

// Repeats reports whether the update whose "fields" member is fields
// changes a document again when applied a second time, so that a request
// of it that may have been applied must not be sent again. An error says
// why fields is not an update's (not valid JSON, not an object of field
// operations, or an operation Vespa does not have): such fields count as
// repeating. It allocates nothing for well-formed fields.
func Repeats(fields []byte) (bool, error) {
	if !json.Valid(fields) {
		return true, errors.New(`"fields" is not a JSON object`)
	}
	return RepeatsWellFormed(fields)
}

// RepeatsWellFormed is Repeats for fields already known to be well-formed
// JSON (a feed's input, which its reader checked): it does not check the
// syntax again.
func RepeatsWellFormed(fields []byte) (bool, error) {
	if first(fields) != '{' {
		return true, errors.New(`"fields" is not a JSON object`)
	}
	repeats := false
	for byField := jsontext.NewMembers(fields); ; {
		rawName, f, ok := byField.Next()
		if !ok {
			return repeats, nil
		}
		r, err := opsRepeat(f, false)
		if err != nil {
			name, _ := jsontext.Unquote(rawName)
			return true, fmt.Errorf("the update of field %q: %v", name, err)
		}
		repeats = repeats || r
	}
}

// opsRepeat reads one field's operations, an object such as {"assign": 1}
// (inMatch: a match's, which also holds "element").
func opsRepeat(f []byte, inMatch bool) (bool, error) {
	if first(f) != '{' {
		return true, errors.New(`not an object of operations (such as {"assign": …})`)
	}
	repeats, n := false, 0
	for ops := jsontext.NewMembers(f); ; n++ {
		rawOp, arg, ok := ops.Next()
		if !ok {
			break
		}
		op, err := jsontext.Unquote(rawOp)
		if err != nil {
			return true, err
		}
		r, known := repeating[string(op)]
		switch {
		case inMatch && string(op) == "element":
			continue
		case !known || inMatch && string(op) == "match":
			return true, fmt.Errorf("%q is not an update operation (assign, add, remove, increment, decrement, multiply, divide, match, modify)", op)
		case string(op) == "match":
			if r, err = opsRepeat(arg, true); err != nil {
				return true, fmt.Errorf("match: %v", err)
			}
		}
		repeats = repeats || r
	}
	if n == 0 {
		return true, errors.New(`not an object of operations (such as {"assign": …})`)
	}
	return repeats, nil
}

// first returns the first byte of the JSON value v that is not a space, or
// 0.
func first(v []byte) byte {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return c
		}
	}
	return 0
}
