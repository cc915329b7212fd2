package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/internal/ledger"
)

// renames returns a channel that receives the name of each file renamed
// into dir, as inotify reports it: a test waits for a checkpoint's rewrite
// without polling.
func renames(t *testing.T, dir string) <-chan string {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	t.Cleanup(func() { f.Close() })
	names := make(chan string, 1024)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for p := buf[:n]; len(p) >= syscall.SizeofInotifyEvent; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&p[0]))
				name := p[syscall.SizeofInotifyEvent : syscall.SizeofInotifyEvent+int(ev.Len)]
				names <- string(bytes.TrimRight(name, "\x00"))
				p = p[syscall.SizeofInotifyEvent+int(ev.Len):]
			}
		}
	}()
	return names
}

// nextRename waits for the next rename of name into the directory
// written watches, and fails the test, with the process's stderr, if the
// process exits first: a test never waits for a checkpoint nobody will
// write.
func nextRename(t *testing.T, written <-chan string, exited <-chan struct{}, name string, stderr *syncBuffer) {
	t.Helper()
	for {
		select {
		case n := <-written:
			if n == name {
				return
			}
		case <-exited:
			t.Fatalf("the process ended before it wrote %s again; stderr:\n%s", name, stderr)
		}
	}
}

// applyServer is a document/v1 server that applies each operation and
// counts it per document, answers 400 to the documents named bad-*, and,
// once hold is set, applies every later operation but holds its answer
// until the client goes away: those are applied, and their outcome is
// unknown to the feeder.
type applyServer struct {
	*httptest.Server
	mu      sync.Mutex
	applied map[string]int
	acked   int
	holdAt  int           // hold the answers once this many were given; 0: never
	reached chan struct{} // closed when holdAt answers were given
}

func newApplyServer(t *testing.T, holdAt int) *applyServer {
	s := &applyServer{applied: map[string]int{}, holdAt: holdAt, reached: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		s.mu.Lock()
		if strings.HasPrefix(id, "bad-") {
			s.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"message":"bad document"}`)
			return
		}
		s.applied[id]++
		hold := s.holdAt > 0 && s.acked >= s.holdAt
		if !hold {
			s.acked++
			if s.acked == s.holdAt {
				close(s.reached)
			}
		}
		s.mu.Unlock()
		if hold {
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, `{"id":"`+id+`"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *applyServer) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(map[string]int, len(s.applied))
	for k, v := range s.applied {
		c[k] = v
	}
	return c
}

// checkpointFile is what the tests read of a feed's checkpoint state
// (resume.FileFeed's, kind "feed").
type checkpointFile struct {
	Line     int          `json:"line"`
	Done     []ledger.Run `json:"done,omitempty"`
	Complete bool         `json:"complete,omitempty"`
}

// covered returns how many elements of an input of one element a line
// the checkpoint at path says are done.
func covered(t *testing.T, path string, array bool) int {
	t.Helper()
	var ck checkpointFile
	if readState(path, "feed", &ck) != nil {
		return 0
	}
	n := int64(ck.Line - 1)
	if array {
		n--
	}
	for _, r := range ck.Done {
		n += r[1] - r[0] + 1
	}
	return int(n)
}

// checkpointInput writes n operations: every 10th an increment of a
// counter (not safe to repeat), every 50th from the 7th a put that the
// server refuses, and puts otherwise. array makes it one JSON array.
func checkpointInput(t *testing.T, n int, array bool) string {
	var b strings.Builder
	if array {
		b.WriteString("[\n")
	}
	for i := range n {
		switch {
		case i%10 == 0:
			fmt.Fprintf(&b, `{"update":"id:a:b::c%d","fields":{"n":{"increment":1}}}`, i)
		case i%50 == 7:
			fmt.Fprintf(&b, `{"put":"id:a:b::bad-%d","fields":{"i":%d}}`, i, i)
		default:
			fmt.Fprintf(&b, `{"put":"id:a:b::p%d","fields":{"i":%d}}`, i, i)
		}
		if array && i < n-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	if array {
		b.WriteString("]\n")
	}
	return writeFile(t, b.String())
}

// feedFileIDs returns the document ids in the feed file at path, each as
// often as it appears.
func feedFileIDs(t *testing.T, path string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ids
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for op, err := range feed.Read(f) {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids[op.ID[strings.LastIndex(op.ID, ":")+1:]]++
	}
	return ids
}

// maxUnappliedPerKill bounds the operations not safe to repeat that a kill
// leaves reserved, and so of unknown outcome, though they never went out:
// those whose reservation had been written and that were about to go.
const maxUnappliedPerKill = 64

// TestFeedCheckpointResumesAfterKill kills a feed with -checkpoint at
// several points (SIGKILL: nothing runs after it) and resumes it, against
// a server that, from the kill point on, applies operations and never
// answers. Nothing is lost: each put is applied, or written to -failed
// once; each increment is applied at most once, and one not applied is in
// F.unknown; what is applied again is at most what was in flight.
func TestFeedCheckpointResumesAfterKill(t *testing.T) {
	t.Parallel()
	const n = 3000
	for _, tc := range []struct {
		name   string
		holdAt int  // the kill comes once the server has answered this many
		wait   bool // and once a checkpoint covers them
		array  bool
	}{
		{"at once", 1, false, false},
		{"after 500", 500, true, false},
		{"after 2000, array", 2000, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := checkpointInput(t, n, tc.array)
			ckPath, failed := filepath.Join(dir, "ck.json"), filepath.Join(dir, "failed.jsonl")
			first := newApplyServer(t, tc.holdAt)
			stderr := newSyncBuffer()
			written := renames(t, dir)
			cmd := startProcess(t, stderr, "feed", "-q", "-url", first.URL, "-checkpoint", ckPath, "-failed", failed, in)
			<-first.reached
			for tc.wait && covered(t, ckPath, tc.array) < tc.holdAt {
				for <-written != "ck.json" {
				}
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			before := first.counts()
			if data, err := os.ReadFile(ckPath); err == nil {
				t.Logf("checkpoint at the kill: %.300s", data)
			}

			second := newApplyServer(t, 0)
			var out, errOut bytes.Buffer
			err := runFeed(t.Context(), []string{"-q", "-url", second.URL, "-checkpoint", ckPath, "-failed", failed, in}, nil, &out, &errOut)
			if err != nil && err != errSilent {
				t.Fatalf("the resumed feed: %v; stderr:\n%s", err, errOut.String())
			}
			after := second.counts()
			failedIDs, unknownIDs := feedFileIDs(t, failed), feedFileIDs(t, failed+".unknown")
			resent, unknown, unapplied := 0, 0, 0
			for i := range n {
				switch {
				case i%10 == 0:
					id := fmt.Sprintf("c%d", i)
					total := before[id] + after[id]
					switch {
					case total > 1:
						t.Errorf("%s applied %d times", id, total)
					case unknownIDs[id] > 1, unknownIDs[id] == 1 && after[id] > 0:
						t.Errorf("%s: applied %d times after the resume, %d times in F.unknown", id, after[id], unknownIDs[id])
					case total == 0 && unknownIDs[id] == 0:
						t.Errorf("%s lost: never applied, not in F.unknown", id)
					}
					unknown += unknownIDs[id]
					if unknownIDs[id] > 0 && total == 0 {
						unapplied++
					}
				case i%50 == 7:
					if id := fmt.Sprintf("bad-%d", i); failedIDs[id] != 1 {
						t.Errorf("%s is %d times in F, want once", id, failedIDs[id])
					}
				default:
					id := fmt.Sprintf("p%d", i)
					switch total := before[id] + after[id]; {
					case total == 0:
						t.Errorf("%s lost", id)
					case total > 1:
						resent += total - 1
					}
				}
			}
			if len(failedIDs) != n/50+1 && len(failedIDs) != n/50 {
				t.Errorf("F holds %d documents, want only the %d refused", len(failedIDs), n/50)
			}
			// Re-sent: the operations in flight at the kill (at most the
			// limiter's cap), and, without a checkpoint covering the
			// answers, those answered.
			bound := feed.DefaultMaxInFlight
			if !tc.wait {
				bound += tc.holdAt
			}
			if resent > bound {
				t.Errorf("%d puts applied again, want at most %d", resent, bound)
			}
			// Of unknown outcome: those on the wire at the kill, and those
			// whose reservation was on disk and that had not gone out yet
			// (at most one dispatch beyond the limiter's limit).
			if unapplied > maxUnappliedPerKill {
				t.Errorf("%d increments reported unknown and never applied, want at most %d", unapplied, maxUnappliedPerKill)
			}
			t.Logf("kill after %d answers: %d applied before, %d after; %d puts re-sent, %d increments of unknown outcome, %d of them never applied",
				tc.holdAt, len(before), len(after), resent, unknown, unapplied)
			var ck checkpointFile
			if err := readState(ckPath, "feed", &ck); err != nil || !ck.Complete {
				t.Errorf("the checkpoint after the resumed feed: %+v, %v; want it complete", ck, err)
			}
		})
	}
}

// TestFeedCheckpointRefusals: -checkpoint refuses stdin, and an input
// other than the one the checkpoint was made from, with exit 2; a feed
// whose checkpoint is complete sends nothing.
func TestFeedCheckpointRefusals(t *testing.T) {
	t.Parallel()
	srv := newApplyServer(t, 0)
	dir := t.TempDir()
	ckPath := filepath.Join(dir, "ck.json")
	in := checkpointInput(t, 20, false)
	var out, errOut bytes.Buffer
	if err := runFeed(t.Context(), []string{"-q", "-url", srv.URL, "-checkpoint", ckPath, in}, nil, &out, &errOut); err != errSilent {
		t.Fatalf("the first feed: %v, want exit 1 for the refused put; stderr:\n%s", err, errOut.String())
	}
	applied := len(srv.counts())
	errOut.Reset()
	if err := runFeed(t.Context(), []string{"-q", "-url", srv.URL, "-checkpoint", ckPath, in}, nil, &out, &errOut); err != nil {
		t.Errorf("feeding again with a complete checkpoint: %v; stderr:\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "fed or reported: nothing to feed") || len(srv.counts()) != applied {
		t.Errorf("feeding again with a complete checkpoint sent %d more; stderr:\n%s", len(srv.counts())-applied, errOut.String())
	}
	other := checkpointInput(t, 21, false)
	for _, args := range [][]string{{other}, {"-"}} {
		stdin, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		err = runFeed(t.Context(), append([]string{"-q", "-url", srv.URL, "-checkpoint", ckPath}, args...), stdin, &out, &errOut)
		stdin.Close()
		if !exits2(err) {
			t.Errorf("-checkpoint with %s: %v, want exit 2", args[0], err)
		}
	}
}

// TestFeedCheckpointInterrupted: a feed with -checkpoint that is
// interrupted (as by SIGTERM) leaves the operations it did not send to the
// resumed feed, not to -failed, and the resumed feed sends them.
func TestFeedCheckpointInterrupted(t *testing.T) {
	t.Parallel()
	const n = 1000
	dir := t.TempDir()
	in := checkpointInput(t, n, false)
	ckPath, failed := filepath.Join(dir, "ck.json"), filepath.Join(dir, "failed.jsonl")
	first := newApplyServer(t, 100)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-first.reached
		cancel()
	}()
	var out, errOut bytes.Buffer
	err := runFeed(ctx, []string{"-q", "-grace", "0", "-url", first.URL, "-checkpoint", ckPath, "-failed", failed, in}, nil, &out, &errOut)
	if err != silentExit(exitInterrupted) {
		t.Fatalf("the interrupted feed: %v, want exit status %d; stderr:\n%s", err, exitInterrupted, errOut.String())
	}
	if ids := feedFileIDs(t, failed); len(ids) > n/50+feed.DefaultMaxInFlight {
		t.Errorf("after the interrupt, F holds %d documents, want at most the %d refused and those on the wire; stderr:\n%s", len(ids), n/50, errOut.String())
	}
	before := first.counts()
	firstErr := errOut.String()
	second := newApplyServer(t, 0)
	errOut.Reset()
	if err := runFeed(t.Context(), []string{"-q", "-url", second.URL, "-checkpoint", ckPath, "-failed", failed, in}, nil, &out, &errOut); err != errSilent {
		t.Fatalf("the resumed feed: %v, want exit 1 for the refused puts; stderr:\n%s", err, errOut.String())
	}
	after := second.counts()
	inF, unknown := feedFileIDs(t, failed), feedFileIDs(t, failed+".unknown")
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		switch {
		case i%10 == 0:
			id = fmt.Sprintf("c%d", i)
			if total := before[id] + after[id]; total > 1 || total+unknown[id] == 0 || unknown[id] > 0 && after[id] > 0 {
				t.Errorf("%s applied %d+%d times, %d times in F.unknown, %d in F; want it applied once, or in F.unknown and not fed again", id, before[id], after[id], unknown[id], inF[id])
				for _, l := range strings.Split(firstErr, "\n") {
					if strings.Contains(l, id+":") {
						t.Log(l)
					}
				}
			}
		case i%50 == 7:
			if id = fmt.Sprintf("bad-%d", i); inF[id] != 1 {
				t.Errorf("%s is %d times in F, want once", id, inF[id])
			}
		case before[id]+after[id]+inF[id] == 0:
			t.Errorf("%s lost", id)
		case inF[id] > 0 && after[id] > 0:
			t.Errorf("%s both in F and fed again", id)
		}
	}
	// A clean end knows what it sent: no increment is of unknown outcome
	// but those canceled on the wire (-grace 0).
	if len(unknown) > feed.DefaultMaxInFlight {
		t.Errorf("%d increments of unknown outcome after a clean end, want at most those in flight", len(unknown))
	}
	t.Logf("%d puts in F (refused or canceled on the wire), %d increments of unknown outcome", len(inF), len(unknown))
}

// TestFeedCheckpointBrokenInput: a feed with -checkpoint that meets broken
// JSON writes the rest to F.unread; feeding again from the checkpoint sends
// nothing and keeps F.unread.
func TestFeedCheckpointBrokenInput(t *testing.T) {
	t.Parallel()
	srv := newApplyServer(t, 0)
	dir := t.TempDir()
	ckPath, failed := filepath.Join(dir, "ck.json"), filepath.Join(dir, "failed.jsonl")
	in := writeFile(t, "{\"put\":\"id:a:b::p1\",\"fields\":{}}\n{\"put\":\"id:a:b::p2\",\"fields\":{}}\n{\"put\": nope}\n{\"put\":\"id:a:b::p3\",\"fields\":{}}\n")
	var out, errOut bytes.Buffer
	args := []string{"-q", "-url", srv.URL, "-checkpoint", ckPath, "-failed", failed, in}
	if err := runFeed(t.Context(), args, nil, &out, &errOut); err != errSilent {
		t.Fatalf("the first feed: %v, want exit 1; stderr:\n%s", err, errOut.String())
	}
	unread, err := os.ReadFile(failed + ".unread")
	if err != nil || !strings.HasPrefix(string(unread), `{"put": nope}`) {
		t.Fatalf("F.unread = %q, %v", unread, err)
	}
	errOut.Reset()
	_ = runFeed(t.Context(), args, nil, &out, &errOut)
	if again, err := os.ReadFile(failed + ".unread"); err != nil || string(again) != string(unread) {
		t.Errorf("after feeding again, F.unread = %q, %v; want it kept; stderr:\n%s", again, err, errOut.String())
	}
	if n := len(srv.counts()); n != 2 {
		t.Errorf("%d documents applied, want the 2 before the broken JSON", n)
	}
}

// progressServer applies every operation and answers it, counting the
// applications per document; wait returns a channel closed once n more
// have been applied.
type progressServer struct {
	*httptest.Server
	mu      sync.Mutex
	applied map[string]int
	total   int
	target  int
	reached chan struct{}
}

func newProgressServer(t *testing.T) *progressServer {
	s := &progressServer{applied: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		s.mu.Lock()
		s.applied[id]++
		s.total++
		if s.reached != nil && s.total >= s.target {
			close(s.reached)
			s.reached = nil
		}
		s.mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"`+id+`"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *progressServer) wait(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.reached = s.total+n, make(chan struct{})
	return s.reached
}

// TestFeedCheckpointManyKills: a feed of 40 000 operations, one in five an
// increment on a document of its own, killed 10 times at random points
// (after 20 to 4 000 more operations applied) and resumed each time, then
// run to its end. Each increment is applied once, or reported of unknown
// outcome and never applied twice; those reported and never applied are
// at most what each kill left reserved and not yet sent. A reservation of
// the next second and a half of input, which rose with each resume (it
// counted the elements a resume skips as read), used to report
// thousands.
func TestFeedCheckpointManyKills(t *testing.T) {
	t.Parallel()
	const n, kills = 40000, 10
	var b strings.Builder
	for i := range n {
		if i%5 == 0 {
			fmt.Fprintf(&b, `{"update":"id:a:b::c%d","fields":{"n":{"increment":1}}}`+"\n", i)
		} else {
			fmt.Fprintf(&b, `{"put":"id:a:b::p%d","fields":{"i":%d}}`+"\n", i, i)
		}
	}
	in := writeFile(t, b.String())
	dir := t.TempDir()
	ckPath, failed := filepath.Join(dir, "ck.json"), filepath.Join(dir, "failed.jsonl")
	srv := newProgressServer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for range kills {
		reached := srv.wait(20 + rng.IntN(4000))
		stderr := newSyncBuffer()
		cmd := startProcess(t, stderr, "feed", "-q", "-url", srv.URL, "-checkpoint", ckPath, "-failed", failed, in)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-reached:
			_ = cmd.Process.Kill()
			<-exited
		case err := <-exited: // it finished first
			t.Logf("a run ended before its kill: %v", err)
		}
	}
	var out, errOut bytes.Buffer
	if err := runFeed(t.Context(), []string{"-q", "-url", srv.URL, "-checkpoint", ckPath, "-failed", failed, in}, nil, &out, &errOut); err != nil && err != errSilent {
		t.Fatalf("the last feed: %v; stderr:\n%s", err, errOut.String())
	}
	applied := srv.counts()
	unknownIDs := feedFileIDs(t, failed+".unknown")
	unknown, unapplied := 0, 0
	for i := 0; i < n; i += 5 {
		id := fmt.Sprintf("c%d", i)
		switch {
		case applied[id] > 1:
			t.Errorf("%s applied %d times", id, applied[id])
		case unknownIDs[id] > 0 && applied[id] > 0:
			unknown++
		case unknownIDs[id] > 0:
			unknown++
			unapplied++
		case applied[id] == 0:
			t.Errorf("%s lost: never applied, not in F.unknown", id)
		}
	}
	for i := range n {
		if id := fmt.Sprintf("p%d", i); i%5 != 0 && applied[id] == 0 {
			t.Errorf("%s lost", id)
		}
	}
	if unapplied > kills*maxUnappliedPerKill {
		t.Errorf("%d increments reported unknown and never applied over %d kills, want at most %d", unapplied, kills, kills*maxUnappliedPerKill)
	}
	t.Logf("%d kills: %d of %d increments of unknown outcome, %d of them never applied", kills, unknown, n/5, unapplied)
}

func (s *progressServer) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.applied)
}

// TestFeedCheckpointRefusesAChangedInput: a resume refuses, with exit 2,
// an input changed in any byte an earlier feed read, though its size and
// its first MiB are the same: a line past the first MiB replaced by
// another of the same length, or blanked. It refuses a -checkpoint that
// names one of the -failed files too.
func TestFeedCheckpointRefusesAChangedInput(t *testing.T) {
	t.Parallel()
	srv := newApplyServer(t, 0)
	var b strings.Builder
	pad := strings.Repeat("x", 400)
	for i := 0; b.Len() < 3<<19; i++ {
		fmt.Fprintf(&b, `{"put":"id:a:b::p%07d","fields":{"i":%d,"s":"%s"}}`+"\n", i, i%10, pad)
	}
	orig := b.String()
	target := `{"put":"id:a:b::p0003000","fields":{"i":0,"s":"` + pad + `"}}`
	at := strings.Index(orig, target)
	if at < 1<<20 {
		t.Fatalf("the line to change is at byte %d, want past the first MiB", at)
	}
	for _, tc := range []struct{ name, edited string }{
		{"replaced", orig[:at] + `{"put":"id:a:b::p0003000","fields":{"i":9,"s":"` + pad + `"}}` + orig[at+len(target):]},
		{"blanked", orig[:at] + strings.Repeat(" ", len(target)) + orig[at+len(target):]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, ckPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "ck.json")
			if err := os.WriteFile(in, []byte(orig), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			args := []string{"-q", "-url", srv.URL, "-checkpoint", ckPath, in}
			if err := runFeed(t.Context(), args, nil, &out, &errOut); err != nil {
				t.Fatalf("the first feed: %v; stderr:\n%s", err, errOut.String())
			}
			if len(tc.edited) != len(orig) {
				t.Fatal("the edit changed the size")
			}
			if err := os.WriteFile(in, []byte(tc.edited), 0o644); err != nil {
				t.Fatal(err)
			}
			errOut.Reset()
			err := runFeed(t.Context(), args, nil, &out, &errOut)
			if !exits2(err) || !strings.Contains(err.Error(), "differ") {
				t.Errorf("resuming on the edited input: %v, want exit 2 saying bytes differ; stderr:\n%s", err, errOut.String())
			}
		})
	}
	t.Run("checkpoint is a -failed file", func(t *testing.T) {
		dir := t.TempDir()
		in := checkpointInput(t, 5, false)
		failed := filepath.Join(dir, "f.jsonl")
		for _, ck := range []string{failed, failed + ".unknown", failed + ".unread", failed + ".partial", failed + ".unknown.partial"} {
			var out, errOut bytes.Buffer
			err := runFeed(t.Context(), []string{"-q", "-url", srv.URL, "-checkpoint", ck, "-failed", failed, in}, nil, &out, &errOut)
			if !exits2(err) {
				t.Errorf("-checkpoint %s with -failed %s: %v, want exit 2", filepath.Base(ck), filepath.Base(failed), err)
			}
		}
	})
}
