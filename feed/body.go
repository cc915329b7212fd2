package feed

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/seed32e55400/retries/internal/redact"
)

// What a report quotes of a response body: document/v1's "message" and
// "trace", with the header values the feed sends redacted.

// maxMessage bounds the part of a response body quoted in a report.
const maxMessage = 200

// message returns the "message" of a document/v1 error body, or the body
// itself, on one line (its runs of white space made one space), with the
// header values the feed sends redacted by secrets, cut short.
func message(body []byte, secrets *redact.Redactor) string {
	var v struct {
		Message string `json:"message"`
	}
	s := string(body)
	if json.Unmarshal(body, &v) == nil && v.Message != "" {
		s = v.Message
	}
	s = strings.Join(strings.Fields(secrets.Redact(s)), " ")
	if s == "" {
		return "(empty body)"
	}
	return cut(s, maxMessage)
}

// maxTrace bounds the part of a trace quoted in a report.
const maxTrace = 2000

// trace returns the "trace" of a document/v1 response body as JSON, cut
// short, or "".
func trace(body []byte, secrets *redact.Redactor) string {
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
	return cut(secrets.Redact(b.String()), maxTrace)
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
