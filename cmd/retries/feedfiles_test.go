package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestMain runs the command itself, as the process, when the test binary
// is started by runProcess.
func TestMain(m *testing.M) {
	if os.Getenv("RETRIES_TEST_MAIN") == "1" {
		os.Args = append([]string{"retries"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

// startProcess starts the command as a process of its own with args.
func startProcess(t *testing.T, stderr *syncBuffer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RETRIES_TEST_MAIN=1")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test's
// reads at once.
type syncBuffer struct {
	b bytes.Buffer
	l chan struct{} // a lock: holds one token while b is used
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{l: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.l <- struct{}{}
	defer func() { <-s.l }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.l <- struct{}{}
	defer func() { <-s.l }()
	return s.b.String()
}

// heldFeed starts a server that answers the first put and holds every
// other request until release is closed, and a 100-put input.
func heldFeed(t *testing.T) (srv *feedtest.Server, input string, held chan struct{}, release chan struct{}) {
	t.Helper()
	held, release = make(chan struct{}, 200), make(chan struct{})
	srv = feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/0") {
			return 0
		}
		held <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusServiceUnavailable
	})
	t.Cleanup(func() { close(release) })
	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
	}
	return srv, writeFile(t, in.String()), held, release
}

// TestFeedFailedFileOnlyWhenComplete: while the feed runs, only
// F.partial exists; a feed killed leaves no F, and F.partial holds whole
// lines of feed input; a SIGHUP ends the feed as SIGTERM does, with F
// complete.
func TestFeedFailedFileOnlyWhenComplete(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			srv, in, held, _ := heldFeed(t)
			failed := filepath.Join(t.TempDir(), "failed.jsonl")
			if err := os.WriteFile(failed, []byte(`{"put":"id:old:run::1","fields":{}}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			stderr := newSyncBuffer()
			cmd := startProcess(t, stderr, "feed", "-q", "-grace", "0", "-concurrency", "4", "-url", srv.URL, "-failed", failed, in)
			for range 4 {
				<-held
			}
			if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("during the feed, F: %v; want it absent (an earlier run's F removed)", err)
			}
			if _, err := os.Stat(failed + ".partial"); err != nil {
				t.Errorf("during the feed, F.partial: %v", err)
			}
			_ = cmd.Process.Signal(sig)
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the process ended with %v, want an exit error", err)
			}
			if sig == syscall.SIGKILL {
				if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("after SIGKILL, F: %v; want it absent", err)
				}
				data, err := os.ReadFile(failed + ".partial")
				if err != nil || len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
					t.Errorf("after SIGKILL, F.partial = %q, %v; want whole lines", data, err)
				}
				return
			}
			if exit.ExitCode() != exitInterrupted {
				t.Errorf("after SIGHUP, exit status %d, want %d; stderr:\n%s", exit.ExitCode(), exitInterrupted, stderr)
			}
			data, err := os.ReadFile(failed)
			if err != nil {
				t.Fatalf("after SIGHUP, F: %v; stderr:\n%s", err, stderr)
			}
			if n := bytes.Count(data, []byte("\n")); n != 99 {
				t.Errorf("after SIGHUP, F holds %d operations, want the 99 not acknowledged; stderr:\n%s", n, stderr)
			}
			if _, err := os.Stat(failed + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after SIGHUP, F.partial: %v; want it renamed to F", err)
			}
		})
	}
}

// TestFeedFailedIsStdin: -failed F with F on stdin is refused, and F is
// left as it was.
func TestFeedFailedIsStdin(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	content := `{"put":"id:a:b::1","fields":{}}` + "\n"
	failed := writeFile(t, content)
	for _, name := range []string{failed, failed + ".unknown"} {
		if name != failed {
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		stdin, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err = runFeed(t.Context(), []string{"-q", "-url", srv.URL, "-failed", failed, "-"}, stdin, &out, &errOut)
		stdin.Close()
		if !exits2(err) || !strings.Contains(err.Error(), "is the input") {
			t.Errorf("stdin %s: runFeed() = %v, want exit 2 naming the input", filepath.Base(name), err)
		}
		if data, _ := os.ReadFile(name); string(data) != content {
			t.Errorf("stdin %s: the file is now %q", filepath.Base(name), data)
		}
	}
}

// TestFeedBrokenJSONUnread: broken JSON at line 2 of 4 stops the reading;
// the input from line 2 on goes to F.unread byte for byte, and stderr says
// what was not fed.
func TestFeedBrokenJSONUnread(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	rest := "{\"put\":\"id:a:b::2\",\"fields\":{]}\n{\"put\":\"id:a:b::3\",\"fields\":{}}\n{\"remove\":\"id:a:b::4\"}\n"
	in := writeFile(t, "{\"put\":\"id:a:b::1\",\"fields\":{}}\n"+rest)
	failed := filepath.Join(t.TempDir(), "failed.jsonl")
	code, _, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-failed", failed, in)
	if code != exitFail {
		t.Errorf("exit status %d, want %d", code, exitFail)
	}
	if data, err := os.ReadFile(failed + ".unread"); string(data) != rest {
		t.Errorf("F.unread = %q, %v; want %q", data, err, rest)
	}
	for _, w := range []string{
		"retries feed: not fed: 1 malformed",
		"the input from line 2 on not read",
		fmt.Sprintf("%s.unread: the %d bytes of input from the broken JSON on, to fix and feed", failed, len(rest)),
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
}

// TestFeedUnknownOutcome: an unsafe update whose connection is reset has
// an unknown outcome: it goes to F.unknown, apart from the operations
// that can be fed again (a put reset too, then held back behind nothing).
func TestFeedUnknownOutcome(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/inc"):
			return feedtest.Reset
		case strings.HasSuffix(r.URL.Path, "/refused"):
			return http.StatusBadRequest
		}
		return 0
	})
	inc := `{"update":"id:a:b::inc","fields":{"n":{"increment":1}}}`
	refused := `{"update":"id:a:b::refused","fields":{"n":{"increment":1}}}`
	in := writeFile(t, `{"put":"id:a:b::1","fields":{}}`+"\n"+inc+"\n"+refused+"\n")
	failed := filepath.Join(t.TempDir(), "failed.jsonl")
	code, out, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-failed", failed, in)
	if code != exitFail {
		t.Errorf("exit status %d, want %d", code, exitFail)
	}
	if data, err := os.ReadFile(failed + ".unknown"); string(data) != inc+"\n" {
		t.Errorf("F.unknown = %q, %v; want the reset increment", data, err)
	}
	if data, err := os.ReadFile(failed); string(data) != refused+"\n" {
		t.Errorf("F = %q, %v; want the refused increment only", data, err)
	}
	if !strings.Contains(stderr, "update id:a:b::inc: ") || !strings.Contains(stderr, "the outcome is unknown: it may have been applied") {
		t.Errorf("stderr does not say the outcome is unknown:\n%s", stderr)
	}
	if !strings.Contains(out, `"retries.unknown.count": 1,`) {
		t.Errorf("summary:\n%s", out)
	}
}

// TestFeedStopsOnSetupRefusal: a refusal of the client itself that
// answers the first operations, and would answer every other, stops the
// feed early with exit 2; what was not acknowledged is in F. A refusal
// after a success does not stop it.
func TestFeedStopsOnSetupRefusal(t *testing.T) {
	t.Parallel()
	tlsPage := "<html>\r\n<head><title>400 No required SSL certificate was sent</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n</body>\r\n</html>\r\n"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		after  int // answer this many first, with 200
		want   int
		stderr string
	}{
		{"401", http.StatusUnauthorized, "", 0, exitUsage, "stopping: the first 20 operations were all refused with 401 Unauthorized"},
		{"403", http.StatusForbidden, "", 0, exitUsage, "refused with 403 Forbidden"},
		{"404_puts", http.StatusNotFound, "", 0, exitUsage, "refused with 404 Not Found"},
		{"400_tls", http.StatusBadRequest, tlsPage, 0, exitUsage, "refused with 400 Bad Request (<html> <head><title>400 No required SSL certificate was sent</title></head>"},
		{"400_document", http.StatusBadRequest, `{"message":"bad field"}`, 0, exitFail, ""},
		{"401_after_success", http.StatusUnauthorized, "", 1, exitFail, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) <= int64(tc.after) {
					fmt.Fprint(w, "{}")
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			var in strings.Builder
			for i := range 300 {
				fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
			}
			failed := filepath.Join(t.TempDir(), "failed.jsonl")
			code, out, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-failed", failed, writeFile(t, in.String()))
			if code != tc.want {
				t.Errorf("exit status %d, want %d; stderr:\n%.2000s", code, tc.want, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr does not say %q:\n%.2000s", tc.stderr, stderr)
			}
			data, _ := os.ReadFile(failed)
			var sum map[string]any
			_ = json.Unmarshal([]byte(out), &sum)
			if lines := bytes.Count(data, []byte("\n")); float64(lines)+sum["feeder.ok.count"].(float64) != 300 {
				t.Errorf("%d in F and %v acknowledged, want 300 in all", lines, sum["feeder.ok.count"])
			}
			if tc.want == exitUsage && requests.Load() > 100 {
				t.Errorf("%d requests before the feed stopped, want at most 100", requests.Load())
			}
		})
	}
}

// TestFeedExitOutage: a feed ended by an outage longer than -max-outage
// exits 4, apart from one whose operations failed (1).
func TestFeedExitOutage(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	var in strings.Builder
	for i := range 50 {
		fmt.Fprintf(&in, `{"put":"id:a:b::%d","fields":{}}`+"\n", i)
	}
	code, out, stderr := runCmd(t, "feed", "-q", "-max-outage", "200ms", "-url", srv.URL, writeFile(t, in.String()))
	if code != exitOutage || !strings.Contains(out, `"retries.maxoutage.exceeded": true`) {
		t.Errorf("exit status %d, want %d; stderr:\n%.1500s", code, exitOutage, stderr)
	}
}

// TestFeedProgressFile: -progress-file takes the progress reports off
// stderr; with -progress-json it holds JSON lines only. The file is a FIFO
// that the test reads, so that the server holds the feed until the first
// report has come, with no polling.
func TestFeedProgressFile(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			return http.StatusBadRequest
		}
		<-release
		return 0
	})
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	if err := syscall.Mkfifo(progress, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	read := make(chan []byte)
	go func() {
		f, err := os.Open(progress) // until the feed opens it for writing
		if err != nil {
			t.Error(err)
			close(release)
			read <- nil
			return
		}
		defer f.Close()
		r := bufio.NewReader(f)
		first, _ := r.ReadBytes('\n')
		close(release) // a report has come: let the feed end
		rest, _ := io.ReadAll(r)
		read <- append(first, rest...)
	}()
	in := writeFile(t, `{"put":"id:a:b::bad","fields":{}}`+"\n"+`{"put":"id:a:b::1","fields":{}}`+"\n")
	code, _, stderr := runCmd(t, "feed", "-progress", "5ms", "-progress-json", "-progress-file", progress, "-url", srv.URL, in)
	if code != exitFail || !strings.Contains(stderr, "failed: line 1") || strings.Contains(stderr, "feeder.") {
		t.Errorf("exit status %d, stderr:\n%s\nwant exit 1, the failure, and no progress report", code, stderr)
	}
	data := <-read
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(data) == 0 {
		t.Fatal("no progress report")
	}
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("-progress-file line %q: %v", line, err)
		}
	}
}
