package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/kafka"
)

// TestMain runs the command itself when the test binary is started by
// startMember.
func TestMain(m *testing.M) {
	if os.Getenv("RETRIES_KAFKA_TEST_MAIN") == "1" {
		os.Args = append([]string{"retries-kafka"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer for a process's output and a test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startMember starts the command as a process of its own.
func startMember(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RETRIES_KAFKA_TEST_MAIN=1")
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &stdout, &stderr
}

// TestMemberKilled: two members feed a topic of 6 partitions; one is killed
// with SIGKILL mid-feed. The other takes its partitions over within the
// session timeout and a rebalance, and resumes from its commits: nothing is
// lost, no increment is applied twice, and what is fed again is bounded.
func TestMemberKilled(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "ops", "dead"), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	const n = 20000
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("ops"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range n {
		value := fmt.Sprintf(`{"put":"id:a:b::p%d","fields":{"i":%d}}`, i, i)
		if i%10 == 0 {
			value = fmt.Sprintf(`{"update":"id:a:b::c%d","fields":{"n":{"increment":1}}}`, i)
		}
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(value)})
	}
	res := prod.ProduceSync(t.Context(), rs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	partitionOf := map[string]int32{} // document id: its partition
	for i, r := range rs {            // ProduceSync sets it (its results are not in this order)
		id := fmt.Sprintf("p%d", i)
		if i%10 == 0 {
			id = fmt.Sprintf("c%d", i)
		}
		partitionOf[id] = r.Partition
	}

	var mu sync.Mutex
	applied := map[string]int{}
	killAt, killed := make(chan struct{}), false
	var lastKill time.Time
	var recovered time.Duration
	var killedParts map[int32]bool // the killed member's partitions
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		mu.Lock()
		defer mu.Unlock()
		applied[id]++
		if len(applied) == n/4 && !killed {
			killed = true
			close(killAt) // and then once the group has committed a part
		}
		if recovered == 0 && killedParts[partitionOf[id]] && applied[id] == 1 {
			recovered = time.Since(lastKill) // the first new document of the killed member's partitions
		}
		return 0
	})
	args := []string{"-brokers", strings.Join(addrs, ","), "-topic", "ops", "-group", "g", "-url", srv.URL,
		"-failed-topic", "dead", "-session-timeout", "1s", "-progress", "0"}
	a, _, aErr := startMember(t, args...)
	if _, err := c.WaitGroupStable(t.Context(), "g", 1); err != nil {
		t.Fatal(err)
	}
	b, bOut, bErr := startMember(t, args...)
	<-killAt
	two, err := c.WaitGroupInfo(t.Context(), "g", func(g *kfake.GroupInfo) bool {
		sum := int64(0)
		for _, cm := range g.Commits["ops"] {
			sum += cm.Offset
		}
		return len(g.Members) == 2 && g.State == "Stable" && sum >= n/5
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	mu.Lock()
	lastKill, before := time.Now(), len(applied)
	mu.Unlock()
	committedAtKill := int64(0)
	for _, cm := range c.GroupInfo("g").Commits["ops"] {
		committedAtKill += cm.Offset
	}
	one, err := c.WaitGroupStable(t.Context(), "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	regrouped := time.Since(lastKill)
	mu.Lock()
	killedParts = map[int32]bool{}
	for _, m := range two.Members {
		if m.MemberID != one.Members[0].MemberID {
			for _, p := range m.Assignment["ops"] {
				killedParts[p] = true
			}
		}
	}
	mu.Unlock()
	// Done: the group's commits reach the topic's end.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.WaitGroupInfo(ctx, "g", func(g *kfake.GroupInfo) bool {
		sum := int64(0)
		for _, cm := range g.Commits["ops"] {
			sum += cm.Offset
		}
		return sum == n
	}); err != nil {
		t.Fatalf("not all committed a minute after the kill; the survivor:\n%.3000s\nthe killed:\n%.3000s", bErr, aErr)
	}
	_ = b.Process.Signal(syscall.SIGTERM)
	if err := b.Wait(); err != nil {
		t.Fatalf("the survivor: %v\n%s", err, bErr)
	}
	letters := deadLetters(t, addrs)
	mu.Lock()
	defer mu.Unlock()
	again, unknown := 0, 0
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		if i%10 == 0 {
			id = fmt.Sprintf("c%d", i)
		}
		switch k := applied[id]; {
		case i%10 == 0 && letters[id] != "":
			unknown++
			if !strings.Contains(letters[id], "in flight when an earlier run stopped") {
				t.Errorf("%s dead-lettered with %q, want an unknown outcome", id, letters[id])
			}
			if k > 1 {
				t.Errorf("%s applied %d times and dead-lettered", id, k)
			}
		case k == 0:
			t.Errorf("%s lost", id)
		case k > 1 && i%10 == 0:
			t.Errorf("%s applied %d times", id, k)
		default:
			again += k - 1
		}
	}
	// Fed again: what the killed member had fed but not committed (at
	// most what both had fed and not committed when it was killed) and what
	// it had in flight.
	if bound := before - int(committedAtKill) + 512; again > bound {
		t.Errorf("%d documents applied again, want at most %d", again, bound)
	}
	if recovered > 15*time.Second {
		t.Errorf("the survivor fed a new document %v after the kill, want within 15 s", recovered)
	}
	t.Logf("killed after %d documents, %d committed; %d applied again, %d increments of unknown outcome; the group had one member %v after the kill, which fed the killed one's partitions %v after it; its summary %s",
		before, committedAtKill, again, unknown, regrouped.Round(time.Millisecond), recovered.Round(time.Millisecond), strings.TrimSpace(bOut.String()))
}

// deadLetters reads the dead topic to its end and returns each letter's
// reason by the document id in its value.
func deadLetters(t *testing.T, addrs []string) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("dead"), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), "dead")
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for got := int64(0); got < want && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got++
			v := string(r.Value)
			id := v[strings.Index(v, "::")+2:]
			id = id[:strings.Index(id, `"`)]
			for _, h := range r.Headers {
				if h.Key == kafka.ReasonHeader {
					out[id] = string(h.Value)
				}
			}
		})
	}
	return out
}
