package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// versionStore is a document/v1 server that keeps each document's state,
// the seq of its last put or its removal, serves 8 requests at once (429
// beyond) of 15 ms each, and records who applied a write: by the port of
// the connection, which tells the members apart.
type versionStore struct {
	*httptest.Server
	slots chan struct{}
	mu    sync.Mutex
	state map[string]int // document: the seq of the last put applied; -1 removed
	woken bool           // count the writes from now on
	late  []string       // writes applied since woken
}

func newVersionStore(t *testing.T) *versionStore {
	s := &versionStore{slots: make(chan struct{}, 8), state: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		time.Sleep(15 * time.Millisecond) // the store's own service time
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		var body struct {
			Fields struct {
				Seq int `json:"seq"`
			} `json:"fields"`
		}
		data, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		if s.woken {
			s.late = append(s.late, r.Method+" "+id+" "+string(data))
		}
		switch r.Method {
		case http.MethodPost:
			_ = json.Unmarshal(data, &body)
			s.state[id] = body.Fields.Seq
		case http.MethodDelete:
			s.state[id] = -1
		}
		s.mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"`+id+`"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestStalledMemberFenced: two members feed 4 000 records on 6 partitions,
// four versions of each of 1 000 documents (puts with a sequence number,
// and a remove as the third version of every seventh), keyed by document
// id. Member A is stopped (SIGSTOP) once 60 % of the topic is committed,
// past its 1 s session timeout, until the group has given its partitions
// to B and B has committed the whole topic; then A goes on, and is
// stopped once the group has told it that it lost its partitions. Without a
// fence, A sent what it had queued when it woke, over B's newer versions.
// Every document's final state must be its last record's.
//
// B feeds the whole topic before A wakes, so that what A had queued (the
// second and third versions, around 60 %) is older than what B wrote.
func TestStalledMemberFenced(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "ops", "dead"), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	const docs, versions = 1000, 4
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("ops"))
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{} // document: the seq of its last put; -1 removed
	var rs []*kgo.Record
	for v := range versions {
		for d := range docs {
			id := fmt.Sprintf("d%d", d)
			seq := v*docs + d
			value := fmt.Sprintf(`{"put":"id:a:b::%s","fields":{"seq":%d}}`, id, seq)
			last[id] = seq
			if v == 2 && d%7 == 0 || v == 3 && d%11 == 0 {
				value = fmt.Sprintf(`{"remove":"id:a:b::%s"}`, id)
				last[id] = -1
			}
			rs = append(rs, &kgo.Record{Key: []byte(id), Value: []byte(value)})
		}
	}
	if err := prod.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	n := int64(len(rs))
	store := newVersionStore(t)
	// Every wait of the group is bounded, so that a member that stops
	// feeding fails the test rather than hanging it.
	waitCtx, cancelWait := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancelWait()
	args := []string{"-brokers", strings.Join(addrs, ","), "-topic", "ops", "-group", "g", "-url", store.URL,
		"-failed-topic", "dead", "-session-timeout", "1s", "-progress", "0"}
	aLost := make(chan struct{})
	aErr := &signalBuffer{patterns: []string{"retries-kafka: lost", "retries-kafka: revoked"}, seen: aLost}
	aErr.from.Store(-1)
	a := startMemberTo(t, aErr, args...)
	if _, err := c.WaitGroupStable(waitCtx, "g", 1); err != nil {
		t.Fatal(err)
	}
	b, _, bErr := startMember(t, args...)
	sum := func(g *kfake.GroupInfo) (s int64) {
		for _, cm := range g.Commits["ops"] {
			s += cm.Offset
		}
		return s
	}
	two, err := c.WaitGroupInfo(waitCtx, "g", func(g *kfake.GroupInfo) bool {
		return len(g.Members) == 2 && g.State == "Stable" && sum(g) >= n*6/10
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Process.Signal(syscall.SIGSTOP)
	// B alone has fed the whole topic, A's partitions' last versions
	// included; then A wakes, with the older versions it had queued.
	if _, err := c.WaitGroupInfo(waitCtx, "g", func(g *kfake.GroupInfo) bool {
		return len(g.Members) == 1 && g.State == "Stable" && sum(g) == n
	}); err != nil {
		t.Fatalf("B did not take over: %v\nB:\n%.2000s", err, bErr)
	}
	store.mu.Lock()
	store.woken = true // B has fed everything: what comes now is A's
	store.mu.Unlock()
	aErr.arm()
	_ = a.Process.Signal(syscall.SIGCONT)
	// The group tells A, a few milliseconds after it wakes: its partitions
	// are lost, or revoked when it rejoins first.
	select {
	case <-aLost:
	case <-time.After(time.Minute):
		t.Fatalf("A was not told that its partitions moved, a minute after it woke:\n%.3000s", aErr.String())
	}
	_ = a.Process.Signal(syscall.SIGTERM)
	_ = b.Process.Signal(syscall.SIGTERM)
	_ = a.Wait()
	_ = b.Wait()
	store.mu.Lock()
	defer store.mu.Unlock()
	wrong := 0
	for id, want := range last {
		got, ok := store.state[id]
		if !ok {
			got = -2
		}
		if got != want {
			wrong++
			if wrong <= 10 {
				t.Errorf("%s: final state %d, want %d (its last record)", id, got, want)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d documents end in another state than their last record's; applied after A woke: %q\nA:\n%.3000s", wrong, docs, store.late, aErr)
	}
	t.Logf("A stopped at %d of %d committed; %d of its writes applied after it woke; every document's final state checked", sum(two), n, len(store.late))
}

// signalBuffer is a process's output that closes seen the first time it
// holds one of patterns.
type signalBuffer struct {
	lockedBuffer
	patterns []string
	seen     chan struct{}
	once     sync.Once
	from     atomic.Int64 // look from this byte on; -1: not yet
}

// arm makes s look for its patterns in what is written from now on.
func (s *signalBuffer) arm() { s.from.Store(int64(len(s.String()))) }

func (s *signalBuffer) Write(p []byte) (int, error) {
	n, err := s.lockedBuffer.Write(p)
	if from := s.from.Load(); from >= 0 {
		out := s.String()[from:]
		for _, pat := range s.patterns {
			if strings.Contains(out, pat) {
				s.once.Do(func() { close(s.seen) })
			}
		}
	}
	return n, err
}

// startMemberTo starts the command as a process of its own, its stderr to
// stderr.
func startMemberTo(t *testing.T, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RETRIES_KAFKA_TEST_MAIN=1")
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
