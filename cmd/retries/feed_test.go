package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const threeOps = `{"put": "id:ns:doc::1", "fields": {"title": "one"}}
{"update": "id:ns:doc::2", "create": true, "fields": {"title": {"assign": "two"}}}

{"remove": "id:ns:doc:n=5:3"}
`

var threeApplied = []string{
	`POST /document/v1/ns/doc/docid/1 {"fields":{"title": "one"}}`,
	`PUT /document/v1/ns/doc/docid/2?create=true {"fields":{"title": {"assign": "two"}}}`,
	`DELETE /document/v1/ns/doc/number/5/3`,
}

func TestFeedFormats(t *testing.T) {
	t.Parallel()
	array := "[\n" + strings.Join(strings.Split(strings.TrimSpace(strings.ReplaceAll(threeOps, "\n\n", "\n")), "\n"), ",\n") + "\n]\n"
	for _, tc := range []struct {
		name, input string
		stdin       bool
	}{
		{"json_lines", threeOps, false},
		{"array", array, false},
		{"array_one_line", strings.ReplaceAll(array, "\n", " "), false},
		{"stdin_json_lines", threeOps, true},
		{"stdin_array", array, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := feedtest.New(t, nil)
			var out, errOut bytes.Buffer
			args := []string{"-url", srv.URL, "-q", "-concurrency", "1", "-"}
			if !tc.stdin {
				args[len(args)-1] = writeFile(t, tc.input)
			}
			if err := runFeed(context.Background(), args, strings.NewReader(tc.input), &out, &errOut); err != nil {
				t.Fatalf("runFeed() = %v, stderr:\n%s", err, &errOut)
			}
			if got := srv.Applied(); !slices.Equal(got, threeApplied) {
				t.Errorf("server applied\n%q\nwant\n%q", got, threeApplied)
			}
			if !strings.Contains(out.String(), `"feeder.ok.count": 3,`) {
				t.Errorf("summary does not count 3 acknowledged:\n%s", &out)
			}
			if errOut.Len() != 0 {
				t.Errorf("stderr = %q, want nothing with -q and no failure", &errOut)
			}
		})
	}
}

func TestFeedBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input string
		want        []string // on stderr
		ok, failed  float64
	}{
		{"json_lines_bad_operation",
			"{\"put\":\"id:a:b::1\",\"fields\":{}}\n{\"put\":\"nope\",\"fields\":{}}\n{\"remove\":\"id:a:b::2\"}\n",
			[]string{`line 2: invalid operation: invalid document id "nope"`}, 2, 1},
		{"json_lines_syntax_error",
			"{\"put\":\"id:a:b::1\",\"fields\":{}}\n{\"put\": \n\n{\"put\":\"id:a:b::2\",\"fields\":{}}\n{\"remove\":\"id:a:b::2\"}\n",
			[]string{"line 5: invalid JSON: '{' after a value: want ',' or '}' (in the operation from line 2); the input from line 2 on was not read"}, 1, 1},
		{"array_bad_element",
			"[\n{\"put\":\"id:a:b::1\",\"fields\":{}},\n{\"put\":\"id:a:b::2\",\n \"fieldz\":{}},\n{\"remove\":\"id:a:b::3\"}\n]",
			[]string{`line 3: invalid operation: unknown key "fieldz"`}, 2, 1},
		{"array_syntax_error",
			"[\n{\"put\":\"id:a:b::1\",\"fields\":{}},\n{\"put\":\"id:a:b::2\",,\n{\"remove\":\"id:a:b::3\"}\n]",
			[]string{"line 3: invalid JSON: ',' where an object key should start; the input from line 3 on was not read"}, 1, 1},
		{"array_unterminated",
			"[\n{\"put\":\"id:a:b::1\",\"fields\":{}}\n",
			[]string{"line 3: invalid JSON: unexpected end of input in the array: want ']'"}, 1, 1},
		{"after_array",
			"[\n{\"put\":\"id:a:b::1\",\"fields\":{}}\n]\n{\"put\":\"id:a:b::2\",\"fields\":{}}\n",
			[]string{"line 4: invalid JSON: '{' after the end of the array; the input from line 4 on was not read"}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := feedtest.New(t, nil)
			code, stdout, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, writeFile(t, tc.input))
			if code != exitFail {
				t.Errorf("exit status = %d, want %d", code, exitFail)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			var sum map[string]any
			if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			if sum["feeder.ok.count"] != tc.ok || sum["feeder.error.count"] != tc.failed {
				t.Errorf("ok, error counts = %v, %v, want %v, %v", sum["feeder.ok.count"], sum["feeder.error.count"], tc.ok, tc.failed)
			}
		})
	}
}

func TestFeedExitStatus(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			return http.StatusBadRequest
		}
		return 0
	})
	good := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n")
	bad := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n"+`{"put":"id:a:b::bad","fields":{}}`+"\n")
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		stderr string
	}{
		{"all_acknowledged", []string{"-url", srv.URL, good}, exitOK, ""},
		{"one_failed", []string{"-url", srv.URL, bad}, exitFail, "failed: line 2: put id:a:b::bad: 400 Bad Request: fault 400 for /document/v1/a/b/docid/bad"},
		{"missing_url", []string{good}, exitUsage, "-url is required"},
		{"bad_url", []string{"-url", "localhost:8080", good}, exitUsage, "want http://"},
		{"unknown_flag", []string{"-url", srv.URL, "-bogus", good}, exitUsage, "flag provided but not defined: -bogus"},
		{"missing_file", []string{"-url", srv.URL, filepath.Join(t.TempDir(), "nope.jsonl")}, exitUsage, "no such file"},
		{"no_file", []string{"-url", srv.URL}, exitUsage, "name a FILE"},
		{"bad_header", []string{"-url", srv.URL, "-header", "NoColon", good}, exitUsage, "want 'Name: value'"},
		{"negative_max_outage", []string{"-url", srv.URL, "-max-outage", "-1s", good}, exitUsage, "-max-outage -1s: must not be negative"},
		{"failed_is_input", []string{"-url", srv.URL, "-failed", good, good}, exitUsage, "is the input"},
		{"bad_compression", []string{"-url", srv.URL, "-compression", "zstd", good}, exitUsage, `-compression "zstd": want auto, gzip or none`},
		{"negative_progress", []string{"-url", srv.URL, "-progress", "-1s", good}, exitUsage, "-progress -1s: must not be negative"},
		{"server_timeout_too_short", []string{"-url", srv.URL, "-server-timeout", "500us", good}, exitUsage, "want 0 or at least 1ms"},
		{"trace_too_high", []string{"-url", srv.URL, "-trace", "10", good}, exitUsage, "-trace"},
		{"failed_unwritable", []string{"-url", srv.URL, "-failed", filepath.Join(t.TempDir(), "no", "dir"), good}, exitUsage, "-failed: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, append([]string{"feed", "-q"}, tc.args...)...)
			if code != tc.want {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tc.want, stderr)
			}
			if tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tc.stderr)
			}
			// The usage follows an error of the command line, not of the
			// setup (a file that cannot be opened).
			setup := tc.name == "missing_file" || tc.name == "failed_unwritable"
			if tc.want == exitUsage && strings.Contains(stderr, "usage:") == setup {
				t.Errorf("stderr, with the usage %v:\n%s", !setup, stderr)
			}
		})
	}
}

func TestFeedHeadersSentNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "Bearer s3cr3t-t0ken"
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/2") {
			return http.StatusUnauthorized
		}
		return 0
	})
	input := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n"+`{"put":"id:a:b::2","fields":{}}`+"\n")
	code, stdout, stderr := runCmd(t, "feed", "-url", srv.URL, "-header", "Authorization: "+secret, "-header", "X-Trace: a", "-q", input)
	if code != exitFail {
		t.Errorf("exit status = %d, want %d", code, exitFail)
	}
	for _, h := range srv.Headers() {
		if h.Get("Authorization") != secret || h.Get("X-Trace") != "a" {
			t.Errorf("server got headers %v, want the -header ones", h)
		}
	}
	if strings.Contains(stdout+stderr, "s3cr3t") {
		t.Errorf("the header's value was printed:\n%s\n%s", stdout, stderr)
	}
	if !strings.Contains(stderr, "401 Unauthorized") {
		t.Errorf("stderr does not report the 401:\n%s", stderr)
	}
}

// TestFeedBadHeaderHidesValue: a mistyped -header is refused without its
// text, which holds a secret.
func TestFeedBadHeaderHidesValue(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"Authorization Bearer s3cret", "Authorization: Bearer s3cret\nX: y"} {
		code, _, stderr := runCmd(t, "feed", "-q", "-url", "http://127.0.0.1:1", "-header", "X-Ok: 1", "-header", bad, "-")
		if code != exitUsage || strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, "-header (the 2nd)") {
			t.Errorf("-header %q: exit %d, stderr:\n%s\nwant exit 2 naming the 2nd -header, without its value", bad, code, stderr)
		}
	}
}

func TestHeaderFlagStringHidesValues(t *testing.T) {
	t.Parallel()
	var h headerFlag
	if err := h.Set("Authorization: Bearer xyz"); err != nil {
		t.Fatal(err)
	}
	if s := h.String(); strings.Contains(s, "xyz") || s != "Authorization" {
		t.Errorf("String() = %q, want the name only", s)
	}
	_ = h.Set("X: a\nb")
	if err := h.check(); err == nil || strings.Contains(err.Error(), "a\nb") {
		t.Errorf("Set with a line break, then check = %v, want an error without the value", err)
	}
}

func TestFeedInterruptWhileReading(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first operation, then silence; interrupt once it reaches the
	// server (the feed waits for it to finish).
	srv := feedtest.New(t, func(*http.Request, int) int { cancel(); return 0 })
	pr, pw := io.Pipe()
	defer pw.Close()
	go fmt.Fprintln(pw, `{"put":"id:a:b::1","fields":{}}`)
	var out, errOut bytes.Buffer
	err := runFeed(ctx, []string{"-url", srv.URL, "-q", "-"}, pr, &out, &errOut)
	if err != silentExit(exitInterrupted) {
		t.Errorf("runFeed() = %v, want exit status %d (interrupted)", err, exitInterrupted)
	}
	if !strings.Contains(errOut.String(), "the input from line 2 on was not read") {
		t.Errorf("stderr does not name the unread input:\n%s", &errOut)
	}
	if !strings.Contains(out.String(), `"feeder.ok.count": 1,`) {
		t.Errorf("summary:\n%s", &out)
	}
}

// TestFeedFailedFile: -failed writes the operations not acknowledged, and
// nothing when all were; feeding it again finishes the job.
func TestFeedFailedFile(t *testing.T) {
	t.Parallel()
	var fixed atomic.Bool
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") && !fixed.Load() {
			return http.StatusBadRequest
		}
		return 0
	})
	in := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n"+`{"put":"id:a:b::bad","fields":{"x": 1}}`+"\n"+`{"remove":"id:a:b::bad"}`+"\n")
	failed := filepath.Join(t.TempDir(), "failed.jsonl")
	code, out, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-failed", failed, in)
	if code != exitFail {
		t.Errorf("exit status = %d, want %d; stderr:\n%s", code, exitFail, stderr)
	}
	data, err := os.ReadFile(failed)
	if want := `{"put":"id:a:b::bad","fields":{"x":1}}` + "\n" + `{"remove":"id:a:b::bad"}` + "\n"; err != nil || string(data) != want {
		t.Errorf("-failed file = %q, %v; want %q", data, err, want)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum["retries.failedfile.count"] != 2.0 {
		t.Errorf("summary failedfile.count = %v (%v), want 2", sum["retries.failedfile.count"], err)
	}
	fixed.Store(true)
	again := filepath.Join(t.TempDir(), "again.jsonl")
	if code, _, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-failed", again, failed); code != exitOK {
		t.Errorf("feeding the -failed file: exit status %d; stderr:\n%s", code, stderr)
	}
	if data, err := os.ReadFile(again); err != nil || len(data) != 0 {
		t.Errorf("-failed file of a complete feed = %q, %v; want it empty", data, err)
	}
}

// TestFeedInnerHonoursRetryAfter: without the limiter (-concurrency N),
// the feed's inner layer waits what a 429's Retry-After asks for, at most
// 10 s, and Throttle's own wait otherwise.
func TestFeedInnerHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{{"3", 3 * time.Second}, {"3600", 10 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			calls := 0
			err := feed.DefaultInner.Do(t.Context(), func(context.Context) error {
				if calls++; calls == 1 {
					return &retries.StatusError{StatusCode: 429, Header: http.Header{"Retry-After": {tc.header}}}
				}
				return nil
			})
			if took := time.Since(start); err != nil || took != tc.want {
				t.Errorf("Retry-After %s: Do() = %v after %v, want nil after %v", tc.header, err, took, tc.want)
			}
		})
	}
}

// TestFeedProgressFlags: -progress-json writes JSON progress lines on
// stderr, and -q silences them whatever -progress says.
func TestFeedProgressFlags(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	in := writeFile(t, threeOps)
	code, _, stderr := runCmd(t, "feed", "-url", srv.URL, "-progress", "1ms", "-progress-json", in)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			t.Errorf("stderr line %q is not JSON", line)
		}
	}
	if code, _, stderr := runCmd(t, "feed", "-q", "-progress", "1ms", "-url", srv.URL, in); code != exitOK || stderr != "" {
		t.Errorf("-q: exit status %d, stderr %q; want 0 and nothing", code, stderr)
	}
}

// TestFeedHeaderFile: -header-file sends its headers, keeps them out of
// the process list, and never prints a value, not even in its errors.
func TestFeedHeaderFile(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	input := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n")
	dir := t.TempDir()
	good := filepath.Join(dir, "headers")
	if err := os.WriteFile(good, []byte("# the token\nAuthorization: Bearer s3cr3t-t0ken\n\nX-Trace: b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-header-file", good, input)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if h := srv.Headers()[0]; h.Get("Authorization") != "Bearer s3cr3t-t0ken" || h.Get("X-Trace") != "b" {
		t.Errorf("server got headers %v, want the file's", h)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("Authorization: ok\nBearer s3cr3t-t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout2, stderr2 := runCmd(t, "feed", "-q", "-url", srv.URL, "-header-file", bad, input)
	if code != exitUsage || !strings.Contains(stderr2, bad+":2: want 'Name: value'") {
		t.Errorf("bad file: exit status %d, stderr:\n%s", code, stderr2)
	}
	if out := stdout + stderr + stdout2 + stderr2; strings.Contains(out, "s3cr3t") {
		t.Errorf("a header's value was printed:\n%s", out)
	}
}

// TestFeedSeveralURLs: -url repeated spreads the operations over the
// endpoints, and the summary describes each.
func TestFeedSeveralURLs(t *testing.T) {
	t.Parallel()
	a, b := feedtest.New(t, nil), feedtest.New(t, nil)
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
	}
	// b's URL carries a password: it is sent, and never printed.
	bURL := strings.Replace(b.URL, "http://", "http://feeder:s3cr3t@", 1)
	code, out, stderr := runCmd(t, "feed", "-q", "-url", a.URL, "-url", bURL, writeFile(t, in.String()))
	if code != exitOK || len(a.Applied())+len(b.Applied()) != 300 || len(a.Applied()) == 0 || len(b.Applied()) == 0 {
		t.Errorf("exit status %d, applied %d and %d, want 0 and a share of 300 each; stderr:\n%s", code, len(a.Applied()), len(b.Applied()), stderr)
	}
	if !strings.Contains(out, `"retries.endpoints": [{`) {
		t.Errorf("summary has no endpoints:\n%s", out)
	}
	if strings.Contains(out+stderr, "s3cr3t") {
		t.Errorf("the URL's password was printed:\n%s\n%s", out, stderr)
	}
	if h := b.Headers(); len(h) == 0 || h[0].Get("Authorization") == "" {
		t.Errorf("b got no basic authorization from its URL")
	}
}

// TestFeedEchoedSecretRedacted: a server that quotes the request's
// headers in an HTML error page, over several lines: each failure is
// reported on one line, its white space collapsed, without the header
// values the feed sent.
func TestFeedEchoedSecretRedacted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<html>\r\n<head><title>400 Bad Request</title></head>\r\n<body>\n  <pre>Authorization: %s\n  X-Token: %s</pre>\n</body>\n</html>\n",
			r.Header.Get("Authorization"), r.Header.Get("X-Token"))
	}))
	defer srv.Close()
	input := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n"+`{"put":"id:a:b::2","fields":{}}`+"\n")
	code, _, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-header", "Authorization: Bearer s3cr3t-t0ken",
		"-header", "X-Token: t0k3n-value", input)
	if code != exitFail {
		t.Errorf("exit status = %d, want %d", code, exitFail)
	}
	if strings.Contains(stderr, "s3cr3t") || strings.Contains(stderr, "t0k3n") {
		t.Errorf("a header's value was printed:\n%s", stderr)
	}
	var failures []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "failed: line") {
			failures = append(failures, l)
		}
	}
	want := "<html> <head><title>400 Bad Request</title></head> <body> <pre>Authorization: [redacted] X-Token: [redacted]</pre> </body> </html>"
	if len(failures) != 2 || !strings.HasSuffix(failures[0], want) {
		t.Errorf("failure lines %q, want two, each ending in %q; stderr:\n%s", failures, want, stderr)
	}
}
