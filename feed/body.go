package feed

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a report quotes of a response body: document/v1's "message" and
// "trace", with the header values the feed sends redacted.

// maxMessage bounds the part of a response body quoted in a report.
const maxMessage = 200

// message returns the "message" of a document/v1 error body, or the body
// itself, on one line (its runs of white space made one space), with the
// header values the feed sends redacted by secrets, cut short.
func message(body []byte, secrets *redactor) string {
	var v struct {
		Message string `json:"message"`
	}
	s := string(body)
	if json.Unmarshal(body, &v) == nil && v.Message != "" {
		s = v.Message
	}
	s = strings.Join(strings.Fields(secrets.redact(s)), " ")
	if s == "" {
		return "(empty body)"
	}
	return cut(s, maxMessage)
}

// maxTrace bounds the part of a trace quoted in a report.
const maxTrace = 2000

// trace returns the "trace" of a document/v1 response body as JSON, cut
// short, or "".
func trace(body []byte, secrets *redactor) string {
	var v struct {
		Trace json.RawMessage `json:"trace"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Trace) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, v.Trace) != nil {
		return ""
	}
	return cut(secrets.redact(b.String()), maxTrace)
}

// redactor removes the header values a feed sends from the text it
// quotes: a server may echo a header it was sent in an error body, as it
// was sent, URL-encoded or base64-encoded.
type redactor struct {
	long  *strings.Replacer // forms of at least minSecret bytes, wherever they stand
	short []string          // shorter forms, redacted only as whole words
}

// minSecret is the length from which a secret is redacted wherever it
// stands; a shorter one ("1", "gzip") only where it is a whole word, so
// that it does not blank out parts of ordinary words.
const minSecret = 6

// newRedactor returns the redactor of the values of h: each value, each
// of its words (the token of "Bearer TOKEN"), and their URL-encoded and
// base64-encoded forms.
func newRedactor(h http.Header) *redactor {
	var forms []string
	add := func(s string) {
		if s == "" {
			return
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s),
			base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
			base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)))
	}
	for _, vs := range h {
		for _, v := range vs {
			add(v)
			if ws := strings.Fields(v); len(ws) > 1 {
				for _, w := range ws {
					if len(w) >= minSecret {
						add(w)
					}
				}
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	r := &redactor{}
	var pairs []string
	for _, v := range slices.Compact(forms) {
		if len(v) >= minSecret {
			pairs = append(pairs, v, "[redacted]")
		} else {
			r.short = append(r.short, v)
		}
	}
	r.long = strings.NewReplacer(pairs...)
	return r
}

// redact returns s with every secret replaced by "[redacted]".
func (r *redactor) redact(s string) string {
	if r == nil {
		return s
	}
	s = r.long.Replace(s)
	for _, v := range r.short {
		s = replaceWord(s, v)
	}
	return s
}

// replaceWord replaces each occurrence of w in s that is not part of a
// longer word (no letter or digit touches it) with "[redacted]".
func replaceWord(s, w string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, w)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(w):])
		b.WriteString(s[:i])
		if i > 0 && isWordRune(before) || i+len(w) < len(s) && isWordRune(after) {
			b.WriteString(w)
		} else {
			b.WriteString("[redacted]")
		}
		s = s[i+len(w):]
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
