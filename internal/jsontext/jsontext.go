// Package jsontext reads JSON text already known to be well formed: the
// members of an object, and strings decoded strictly. Nothing here checks
// syntax again. Package feed reads its input with it (after its own
// scanner has checked the syntax), and package updates the updates.
package jsontext

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// Members iterates over the members of a well-formed JSON object.
type Members struct {
	data []byte
	pos  int
}

// NewMembers returns the members of obj, a well-formed JSON object.
func NewMembers(obj []byte) Members {
	return Members{data: obj, pos: skipSpace(obj, 0) + 1} // past '{'
}

// Next returns the next member's key (quoted, as written) and value, or
// ok false after the last.
func (m *Members) Next() (key, value []byte, ok bool) {
	i := skipSpace(m.data, m.pos)
	if i >= len(m.data) || m.data[i] == '}' {
		return nil, nil, false
	}
	if m.data[i] == ',' {
		i = skipSpace(m.data, i+1)
	}
	k := skipValue(m.data, i)
	key = m.data[i:k]
	v := skipSpace(m.data, skipSpace(m.data, k)+1) // past ':'
	end := skipValue(m.data, v)
	m.pos = end
	return key, m.data[v:end], true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the offset just after the well-formed value at i.
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number or a literal ends at the first byte that cannot be in one.
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// skipString returns the offset just after the string that starts at i.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

var errLoneSurrogate = errors.New(`a lone UTF-16 surrogate escape ("\uD800" to "\uDFFF" without its pair)`)

// Unquote decodes the well-formed JSON string s, quotes included. It
// returns s's own bytes when there is nothing to decode, so a key can be
// compared without a copy. A \u escape of half a surrogate pair without
// the other half is an error, as it is not a Unicode character; invalid
// UTF-8 is left to the caller.
func Unquote(s []byte) ([]byte, error) {
	s = s[1 : len(s)-1]
	i := 0
	for i < len(s) && s[i] != '\\' {
		i++
	}
	if i == len(s) {
		return s, nil
	}
	out := make([]byte, i, len(s))
	copy(out, s)
	for i < len(s) {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		c = s[i+1]
		i += 2
		switch c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = hex4(s[i+2:])
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, errLoneSurrogate
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, c)
		}
	}
	return out, nil
}

// hex4 is the value of the four hex digits at the start of s.
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
