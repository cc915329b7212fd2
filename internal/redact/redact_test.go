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
