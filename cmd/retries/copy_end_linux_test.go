package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/visit/visittest"
)

// process is the command run as a process of its own, its stderr read line
// by line as it comes.
type process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	lines  chan string // stderr's lines, closed at its end
	mu     sync.Mutex
	stderr strings.Builder
}

func startCommand(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(os.Args[0], args...), lines: make(chan string, 4096)}
	p.cmd.Env = append(os.Environ(), "RETRIES_TEST_MAIN=1")
	p.cmd.Stdout = &p.stdout
	r, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody is waiting for lines
			}
		}
	}()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	return p
}

// waitLine waits for a line of stderr that holds s, and fails t if the
// process ends first, or has printed none after a minute.
func (p *process) waitLine(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the process ended without a line holding %q; stderr:\n%s", s, p.errText())
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line holding %q after a minute; stderr:\n%s", s, p.errText())
		}
	}
}

// wait waits for the process to end and returns its exit status, failing
// t if it has not ended after a minute: the point of these tests is that
// it ends.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		for range p.lines { // drain, so that the reader ends
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("still running after a minute; stderr so far:\n%s", p.errText())
	}
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (p *process) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// TestCopyEndsWhenTheDestinationStaysDown: a copy whose destination is
// refused for good, or goes down mid-copy, for longer than -max-outage
// exits 4 with its summary, saying which side was out and why, with or
// without a checkpoint; the checkpoint then resumes the copy to its end.
// The copy used to wait for ever: the visit waited for room in a queue that
// nothing drained once the feed had stopped.
func TestCopyEndsWhenTheDestinationStaysDown(t *testing.T) {
	t.Parallel()
	const docs = 6000 // far more than the copy queues
	src := visittest.New(t, docs, 64, nil)
	for _, mid := range []bool{false, true} {
		for _, withCheckpoint := range []bool{false, true} {
			var dst *feedtest.Server
			var down sync.Once
			var requests atomic.Int64
			var up atomic.Bool // up again for good
			dst = feedtest.New(t, func(*http.Request, int) int {
				if requests.Add(1) > 500 && !up.Load() {
					down.Do(func() { go dst.Down() })
					return feedtest.Reset
				}
				return 0
			})
			to := dst.URL
			if !mid {
				to = deadURL(t)
			}
			ck := filepath.Join(t.TempDir(), "ck.json")
			args := []string{"copy", "-q", "-from", src.URL, "-to", to, "-cluster", "music", "-max-outage", "500ms"}
			if withCheckpoint {
				args = append(args, "-checkpoint", ck)
			}
			p := startCommand(t, args...)
			code := p.wait(t)
			stderr := p.errText()
			if code != exitOutage || !strings.Contains(p.stdout.String(), `"retries.maxoutage.exceeded": true`) {
				t.Fatalf("mid-copy %v, -checkpoint %v: exit %d, want %d and the summary; stdout:\n%.800s\nstderr:\n%s",
					mid, withCheckpoint, code, exitOutage, p.stdout.String(), stderr)
			}
			if !strings.Contains(stderr, "the destination: paused: the server is failing (") ||
				!strings.Contains(stderr, "the destination was out for longer than -max-outage") ||
				!mid && !strings.Contains(stderr, "connection refused") {
				t.Errorf("mid-copy %v: stderr does not say that the destination was out, and why:\n%s", mid, stderr)
			}
			if !withCheckpoint || !mid {
				continue
			}
			up.Store(true)
			if err := dst.Up(); err != nil {
				t.Fatal(err)
			}
			var c copyCheckpoint
			if err := readState(ck, "copy", &c); err != nil || c.Complete {
				t.Fatalf("the checkpoint after the outage: %+v, %v", c, err)
			}
			p = startCommand(t, "copy", "-q", "-from", src.URL, "-to", dst.URL, "-cluster", "music", "-checkpoint", ck)
			if code := p.wait(t); code != 0 {
				t.Fatalf("the resumed copy: exit %d; stderr:\n%s", code, p.errText())
			}
			count, _ := appliedPuts(t, dst)
			checkCopied(t, count, docs)
		}
	}
}

// TestCopyInterruptedOnce: one SIGINT or SIGTERM ends a copy whose
// destination is down (and -max-outage far away) with exit 3 and its
// summary; it used to do nothing, and a second signal killed the process
// without either.
func TestCopyInterruptedOnce(t *testing.T) {
	t.Parallel()
	src := visittest.New(t, 6000, 64, nil)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ck := filepath.Join(t.TempDir(), "ck.json")
		p := startCommand(t, "copy", "-from", src.URL, "-to", deadURL(t), "-cluster", "music",
			"-max-outage", "1h", "-checkpoint", ck)
		p.waitLine(t, "connection refused")
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != exitInterrupted || !strings.Contains(p.stdout.String(), `"feeder.ok.count"`) {
			t.Errorf("%v: exit %d, want %d with the summary; stdout:\n%.500s\nstderr:\n%s",
				sig, code, exitInterrupted, p.stdout.String(), p.errText())
		}
	}
}

// TestDeadEndpointSaid: visit and copy against a port where nothing
// listens say why within two seconds, and their progress lines say for how
// long they have waited and how long they wait more; they end
// with exit 4 after -max-outage, naming the side that was out. The visit
// used to print nothing until then, and a copy never named the source.
func TestDeadEndpointSaid(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	dst := feedtest.New(t, nil)
	for _, tc := range []struct {
		args        []string
		first, last string
	}{
		{[]string{"visit", "-url", dead, "-cluster", "music", "-max-outage", "2500ms"},
			"retries visit: failing: dial tcp", "retries visit: a slice has failed for longer than -max-outage"},
		{[]string{"copy", "-from", dead, "-to", dst.URL, "-cluster", "music", "-max-outage", "2500ms"},
			"retries copy: the source: failing: dial tcp", "0 acknowledged: the source: a slice has failed for longer than -max-outage"},
	} {
		p := startCommand(t, tc.args...)
		// The failure is told once it has lasted half a second, at the
		// next failed attempt: before the progress line of the second
		// second at the latest.
		var failing string
		for failing == "" {
			l := p.waitLine(t, "")
			switch {
			case strings.HasPrefix(l, tc.args[0]+"   2."):
				t.Fatalf("%s: no line says what fails before %q; stderr:\n%s", tc.args[0], l, p.errText())
			case strings.HasPrefix(l, tc.first):
				failing = l
			}
		}
		if !strings.Contains(failing, "connection refused") || !strings.Contains(failing, "for up to 2.5s (-max-outage)") {
			t.Errorf("%s: %q, want the cause and the wait", tc.args[0], failing)
		}
		progress := p.waitLine(t, tc.args[0]+"   2.")
		if !strings.Contains(progress, " failing for ") || !strings.Contains(progress, "connection refused") || !strings.Contains(progress, "unless a request succeeds (-max-outage)") {
			t.Errorf("%s: the progress line %q says nothing of the failure", tc.args[0], progress)
		}
		if code := p.wait(t); code != exitOutage || !strings.Contains(p.errText(), tc.last) {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", tc.args[0], code, exitOutage, p.errText())
		}
	}
}

// TestCopyProgressJSON: a copy's JSON progress reports carry the visit's
// side beside the feed's keys: the documents visited, the slices done and
// the source's failure; they had the feed's keys alone.
func TestCopyProgressJSON(t *testing.T) {
	t.Parallel()
	dst := feedtest.New(t, nil)
	code, _, stderr := runCmd(t, "copy", "-from", deadURL(t), "-to", dst.URL, "-cluster", "music", "-max-outage", "1200ms",
		"-progress", "500ms", "-progress-json")
	var reports []map[string]any
	for line := range strings.Lines(stderr) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			reports = append(reports, m)
		}
	}
	if code != exitOutage || len(reports) == 0 {
		t.Fatalf("exit %d, %d JSON reports; stderr:\n%s", code, len(reports), stderr)
	}
	last := reports[len(reports)-1]
	failing, _ := last["copy.source.failing"].(string)
	if _, ok := last["feeder.ok.count"]; !ok || last["copy.slices"] != 8.0 || last["copy.visited.count"] != 0.0 || !strings.Contains(failing, "connection refused") {
		t.Errorf("the last report %v: want the feed's keys and the visit's, its failure named", last)
	}
}
