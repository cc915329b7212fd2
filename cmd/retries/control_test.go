package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries/control/controltest"
)

// appDir writes an application package directory with services.xml.
func appDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.xml"), []byte("<services/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "music.sd"), []byte("schema music {}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// standIn starts a stand-in on loopback with two containers and a content
// node that move to a new generation within tens of milliseconds, edited
// by edit before it starts.
func standIn(t *testing.T, edit func(*controltest.Server)) *controltest.Server {
	t.Helper()
	s := &controltest.Server{Services: []controltest.Service{
		{Type: "container", Cluster: "default", Lag: 30 * time.Millisecond, Initializing: 20 * time.Millisecond},
		{Type: "container", Cluster: "default", Lag: 60 * time.Millisecond},
		{Type: "searchnode", Cluster: "music", Host: "n1", Lag: 10 * time.Millisecond, ProxyOnly: true},
	}}
	if edit != nil {
		edit(s)
	}
	s.Start()
	t.Cleanup(s.Close)
	s.Deployed(1)
	return s
}

// TestDeployCommand: the exits of retries deploy against the stand-in on
// loopback, each with what it says.
func TestDeployCommand(t *testing.T) {
	t.Parallel()
	dir := appDir(t)
	for _, c := range []struct {
		name  string
		edit  func(*controltest.Server)
		args  []string
		code  int
		posts int
		say   string
	}{
		{"serves", nil, nil, 0, 1, "generation 2 serves: every service at it, every container up"},
		{"lost after commit", func(s *controltest.Server) { s.Posts = []controltest.Fault{controltest.LostAfterCommit} }, nil, 0, 1, "adopted: posted once"},
		{"not activated", func(s *controltest.Server) {
			s.Posts, s.ActivateConflicts = []controltest.Fault{controltest.NotActivated}, 2
		}, nil, 0, 1, "was prepared but not activated; activated it"},
		{"invalid", func(s *controltest.Server) { s.Posts = []controltest.Fault{controltest.Invalid} }, nil, 1, 1, "400 Bad Request INVALID_APPLICATION_PACKAGE"},
		{"unauthorized", func(s *controltest.Server) { s.Posts = []controltest.Fault{controltest.Unauthorized} }, nil, 2, 1, "check the credentials"},
		{"config failure", func(s *controltest.Server) { s.Services[1].Fail = "Could not construct component 'model'" }, nil, 1, 1, "failed to apply generation 2: Could not construct component 'model'"},
		{"restart", func(s *controltest.Server) { s.Services[0].Restart = true }, nil, 5, 1, "apply the change only when restarted: container on 127.0.0."},
		{"lags past -wait", func(s *controltest.Server) { s.Services[1].Lag = time.Hour }, []string{"-wait", "1s"}, 4, 1, "waiting for generation 2: container on 127.0.0."},
		{"no wait", nil, []string{"-wait", "0"}, 0, 1, "generation 2 activated (no wait)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := standIn(t, c.edit)
			js := filepath.Join(t.TempDir(), "deploy.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"deploy", "-url", s.URL(), "-json", js}, c.args...)
			code := run(append(args, dir), &stdout, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.say) {
				t.Errorf("exit %d, want %d, saying %q; stderr:\n%s", code, c.code, c.say, &stderr)
			}
			if n := s.Counts().Posts; n != c.posts {
				t.Errorf("%d POSTs, want %d", n, c.posts)
			}
			var sum map[string]any
			b, err := os.ReadFile(js)
			if err != nil || json.Unmarshal(b, &sum) != nil {
				t.Fatalf("-json: %v: %s", err, b)
			}
			if sum["exit"] != float64(c.code) || sum["posts"] != float64(c.posts) {
				t.Errorf("-json exit %v posts %v, want %d and %d: %s", sum["exit"], sum["posts"], c.code, c.posts, b)
			}
			if c.code == 0 && c.args == nil && (sum["converged"] != true || sum["healthy"] != true || !strings.Contains(stdout.String(), "searchnode")) {
				t.Errorf("-json %s, table:\n%s", b, &stdout)
			}
		})
	}
}

// TestDeployCommandSetup: what a user gets wrong is said at once, exit 2,
// with nothing posted.
func TestDeployCommandSetup(t *testing.T) {
	t.Parallel()
	s := standIn(t, nil)
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"deploy", "-url", s.URL(), empty}, "has no services.xml at its root"},
		{[]string{"deploy", "-url", s.URL(), filepath.Join(empty, "missing")}, "no such file or directory"},
		{[]string{"deploy", "-url", s.URL()}, "want one APP_DIR or APP.zip"},
		{[]string{"deploy", "-url", s.URL() + "/application/v2", appDir(t)}, "has a path"},
		{[]string{"deploy", "-url", s.URL(), "-json", filepath.Join(empty, "no", "such", "dir.json"), appDir(t)}, "-json"},
		{[]string{"wait", "-url", s.URL(), "-wait", "0"}, "want a positive duration"},
		{[]string{"wait", "-url", s.URL(), "-genration", "3"}, "flag provided but not defined: -genration"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.say) {
			t.Errorf("%q: exit %d, want 2, saying %q; stderr:\n%s", c.args, code, c.say, &stderr)
		}
	}
	if n := s.Counts().Posts; n != 0 {
		t.Errorf("%d POSTs, want none", n)
	}
}

// TestWaitCommand: retries wait on an application deployed and moving,
// through a container's host reached only by the proxy; a dead config
// server is said while it is waited for, and -wait ends it with exit 4;
// an interrupt ends it with exit 3.
func TestWaitCommand(t *testing.T) {
	t.Parallel()
	t.Run("serves", func(t *testing.T) {
		t.Parallel()
		s := standIn(t, func(s *controltest.Server) { s.Services[0].ProxyOnly, s.Services[0].Host = true, "c-internal" })
		var stdout, stderr bytes.Buffer
		if code := run([]string{"wait", "-url", s.URL()}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "up (through the config server)") {
			t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
		}
	})
	t.Run("never deployed", func(t *testing.T) {
		t.Parallel()
		s := &controltest.Server{Services: []controltest.Service{{Type: "container", Cluster: "default"}}}
		s.Start()
		t.Cleanup(s.Close)
		var stdout, stderr bytes.Buffer
		if code := run([]string{"wait", "-url", s.URL(), "-application", "music"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "tenant default has no application music deployed") {
			t.Errorf("exit %d, want 1; stderr:\n%s", code, &stderr)
		}
	})
	t.Run("a container's URL", func(t *testing.T) {
		t.Parallel()
		s := standIn(t, nil)
		c := s.Services[0]
		var stdout, stderr bytes.Buffer
		code := run([]string{"deploy", "-url", "http://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), appDir(t)}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "is -url the config server's") {
			t.Errorf("exit %d, want 1; stderr:\n%s", code, &stderr)
		}
	})
	t.Run("dead config server", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		for _, args := range [][]string{{"wait"}, {"deploy", appDir(t)}} {
			var stdout, stderr bytes.Buffer
			code := run(append(args, "-url", "http://"+addr, "-wait", "2s"), &stdout, &stderr)
			if code != 4 || !strings.Contains(stderr.String(), "the config server: ") ||
				!strings.Contains(stderr.String(), "-wait ran out before the config server answered: ") || !strings.Contains(stderr.String(), "connection refused") {
				t.Errorf("%s: exit %d, want 4, saying the connection was refused; stderr:\n%s", args[0], code, &stderr)
			}
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		s := standIn(t, func(s *controltest.Server) { s.Services[1].Lag = time.Hour })
		ctx, cancel := context.WithCancel(context.Background())
		w := &signalWriter{want: "services done", found: make(chan struct{})}
		go func() {
			<-w.found
			cancel()
		}()
		var stdout bytes.Buffer
		code := runContext(ctx, []string{"deploy", "-url", s.URL(), appDir(t)}, &stdout, w)
		if code != 3 || !strings.Contains(w.String(), "interrupted") {
			t.Errorf("exit %d, want 3; stderr:\n%s", code, w)
		}
	})
}

// signalWriter collects what is written and closes found once it holds
// want.
type signalWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	want  string
	found chan struct{}
	once  sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.found) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
