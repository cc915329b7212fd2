package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestURLPasswordNeverPrinted: a password given in -url
// (http://user:PASSWORD@host) is never printed: not by feed, visit or
// delete when the server echoes the Basic header Go's client makes of
// it (as sent, decoded, URL-encoded) in its error, and not by bench in
// its report, its -json file or what it says of the endpoints. bench
// printed the URL whole, and the others the server's echo.
func TestURLPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	const user, pw = "alice", "Pa55w0rd!zq"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		msg := fmt.Sprintf("refused %s (%s:%s, %s)", r.Header.Get("Authorization"), user, pw, url.QueryEscape(pw))
		_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "root": map[string]any{"errors": []map[string]any{{"code": 4, "message": msg}}}})
	}
	srv := httptest.NewServer(http.HandlerFunc(echo))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword(user, pw)
	dir := t.TempDir()
	input := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n")
	queries := writeFile(t, "/search/?yql=select+*+from+music+where+true\n")
	report := filepath.Join(dir, "report.json")
	for _, args := range [][]string{
		{"feed", "-q", "-url", u.String(), input},
		{"visit", "-q", "-url", u.String(), "-cluster", "music", "-o", filepath.Join(dir, "out.jsonl")},
		{"delete", "-q", "-url", u.String(), "-cluster", "music", "-selection", "true"},
		{"bench", "-url", u.String(), "-rate", "20", "-duration", "100ms", "-json", report, queries},
	} {
		code, stdout, stderr := runCmd(t, args...)
		printed := stdout + stderr
		if args[0] == "bench" {
			data, _ := os.ReadFile(report)
			printed += string(data)
		}
		if !strings.Contains(printed, "refused") && args[0] != "bench" {
			t.Errorf("%s: exit %d, the server's message not said; stderr:\n%s", args[0], code, stderr)
		}
		for _, secret := range []string{pw, basic, url.QueryEscape(pw)} {
			if strings.Contains(printed, secret) {
				t.Errorf("%s (exit %d) printed %q:\n%s", args[0], code, secret, printed)
			}
		}
	}
}
