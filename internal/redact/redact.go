// Package redact removes the header values a client sends (a token, a
// password) from the text it quotes of a server's answers, in the forms a
// server may echo them: as sent, URL-encoded, base64-encoded or
// JSON-escaped.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redactor removes the header values a feed sends from the text it
// quotes: a server may echo a header it was sent in an error body, as it
// was sent, URL-encoded or base64-encoded.
type Redactor struct {
	long  *strings.Replacer // forms of at least minSecret bytes, wherever they stand
	short []string          // shorter forms, redacted only as whole words
}

// minSecret is the length from which a secret is redacted wherever it
// stands; a shorter one ("1", "gzip") only where it is a whole word, so
// that it does not blank out parts of ordinary words.
const minSecret = 6

// New returns the Redactor of the values of h: each value, each of its
// words (the token of "Bearer TOKEN"), and their URL-encoded,
// base64-encoded and JSON-escaped forms; and of the password of each of
// urls that has one (http://user:PASSWORD@host), with "user:PASSWORD"
// (whose base64 is the Basic Authorization header Go's client sends for
// it) in the same forms. A nil *Redactor redacts nothing.
func New(h http.Header, urls ...string) *Redactor {
	var forms []string
	add := func(s string) {
		if s == "" {
			return
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s),
			base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
			base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)))
		for _, escape := range []bool{true, false} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(escape)
			if enc.Encode(s) == nil {
				forms = append(forms, strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(b.String()), `"`), `"`))
			}
		}
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
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			add(pw)
			add(u.User.Username() + ":" + pw)
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	r := &Redactor{}
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

// Redact returns s with every secret replaced by "[redacted]".
func (r *Redactor) Redact(s string) string {
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
