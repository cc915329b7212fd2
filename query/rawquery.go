package query

import (
	"net/url"
	"strings"
)

// cutTimeout returns the query string raw without its timeout parameters,
// as written otherwise, and the last timeout it held, if one reads as a
// timeout. A pair whose key is no valid escape is kept as it is.
func cutTimeout(raw string) (rest string, timeout string, ok bool) {
	if raw == "" {
		return "", "", false
	}
	var kept []string
	for pair := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if key, err := url.QueryUnescape(k); err == nil && key == "timeout" {
			if val, err := url.QueryUnescape(v); err == nil {
				timeout, ok = val, true
			}
			continue
		}
		kept = append(kept, pair)
	}
	return strings.Join(kept, "&"), timeout, ok
}

// sendable returns a query string written by hand ready for a request
// line, as written but for what a request line cannot carry: white space,
// control bytes and bytes beyond ASCII are escaped; a ";", a "%" that
// starts no escape and the rest go as they are, as vespa-fbench sends its
// query file's lines.
func sendable(raw string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c <= ' ' || c >= 0x7f || c == '#' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
