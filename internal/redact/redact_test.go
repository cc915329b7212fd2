package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRedact: a header value echoed as sent, URL-encoded, base64-encoded
// or JSON-escaped (in a body that is not JSON, which nothing decodes) is
// redacted, and so is each long word of it; a short value only as a
// whole word.
func TestRedact(t *testing.T) {
	t.Parallel()
	secret := "Bearer s3cr3t/t0ken+x=y<&>"
	r := New(http.Header{"Authorization": {secret}, "X-Tenant": {"ab1"}})
	token := "s3cr3t/t0ken+x=y<&>"
	escaped, _ := json.Marshal(secret)
	for _, echo := range []string{
		secret, token, url.QueryEscape(secret), url.PathEscape(token),
		base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(token)),
		strings.Trim(string(escaped), `"`),
	} {
		got := r.Redact("refused: " + echo + " (tenant ab1, cab1n kept)")
		if strings.Contains(got, echo) || !strings.Contains(got, "[redacted]") {
			t.Errorf("Redact(%q) = %q, want it redacted", echo, got)
		}
		if strings.Contains(got, "ab1,") || !strings.Contains(got, "cab1n") {
			t.Errorf("Redact(%q) = %q, want ab1 redacted as a word and cab1n kept", echo, got)
		}
	}
	if got := (*Redactor)(nil).Redact("x"); got != "x" {
		t.Errorf("a nil Redactor: %q", got)
	}
}

// TestRedactURLPassword: the password of a URL, and the Basic header Go's
// client makes of it, are redacted in every form; the user alone and a
// URL without a password add nothing.
func TestRedactURLPassword(t *testing.T) {
	t.Parallel()
	r := New(nil, "http://alice:Pa55w0rd!zq@host:8080", "http://bob@other", "::bad")
	basic := base64.StdEncoding.EncodeToString([]byte("alice:Pa55w0rd!zq"))
	for _, echo := range []string{"Pa55w0rd!zq", "Basic " + basic, basic, url.QueryEscape("Pa55w0rd!zq"), "alice:Pa55w0rd!zq"} {
		if got := r.Redact("echo: " + echo); strings.Contains(got, "Pa55w0rd") || strings.Contains(got, basic) {
			t.Errorf("Redact(%q) = %q", echo, got)
		}
	}
	if got := r.Redact("alice and bob"); got != "alice and bob" {
		t.Errorf("Redact of the users = %q, want them kept", got)
	}
}
