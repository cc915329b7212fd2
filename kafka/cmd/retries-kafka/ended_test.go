package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestAcknowledgedIncrementNotRepeated: an increment acknowledged while an
// earlier record of its partition is unanswered lies past the committed
// offset. A member killed then (SIGKILL, the earlier put held on the wire)
// leaves the partition to the next, which feeds it again from that offset:
// the put goes out again, but the increment was applied and must be
// neither sent again nor dead-lettered. The commit metadata used to list
// only the increments reserved and not done, so the next owner applied it
// a second time (TestMemberKilled saw one in 20 runs).
func TestAcknowledgedIncrementNotRepeated(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ops", "dead"), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("ops"))
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(t.Context(),
		&kgo.Record{Key: []byte("p0"), Value: []byte(`{"put":"id:a:b::p0","fields":{}}`)},
		&kgo.Record{Key: []byte("c1"), Value: []byte(`{"update":"id:a:b::c1","fields":{"n":{"increment":1}}}`)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	var mu sync.Mutex
	applied := map[string]int{}
	hold := make(chan struct{}) // closed: the put is answered
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if id == "p0" {
			select {
			case <-hold:
			case <-r.Context().Done():
				return feedtest.Reset
			}
		}
		mu.Lock()
		defer mu.Unlock()
		applied[id]++
		return 0
	})
	args := []string{"-brokers", strings.Join(addrs, ","), "-topic", "ops", "-group", "g", "-url", srv.URL,
		"-failed-topic", "dead", "-session-timeout", "1s", "-progress", "0"}
	a, _, aErr := startMember(t, args...)
	// The increment is acknowledged, and a commit made after that no longer
	// holds its reservation: the group has what A knows of it.
	wait, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.WaitGroupInfo(wait, "g", func(g *kfake.GroupInfo) bool {
		if g == nil {
			return false
		}
		cm, ok := g.Commits["ops"][0]
		mu.Lock()
		answered := applied["c1"] == 1
		mu.Unlock()
		reserved := strings.Contains(","+strings.TrimPrefix(cm.Metadata, "retries-reserved2=")+",", ",1,")
		return ok && answered && cm.Offset == 0 && strings.HasPrefix(cm.Metadata, "retries-reserved2=") && !reserved
	}); err != nil {
		t.Fatalf("the increment was not acknowledged and committed: %v\n%.3000s", err, aErr)
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	close(hold)
	b, _, bErr := startMember(t, args...)
	if _, err := c.WaitGroupInfo(wait, "g", func(g *kfake.GroupInfo) bool {
		return g != nil && g.Commits["ops"][0].Offset == 2
	}); err != nil {
		t.Fatalf("B did not commit the partition: %v\n%.3000s", err, bErr)
	}
	_ = b.Process.Signal(syscall.SIGTERM)
	if err := b.Wait(); err != nil {
		t.Fatalf("B: %v\n%s", err, bErr)
	}
	letters := deadLetters(t, addrs)
	mu.Lock()
	defer mu.Unlock()
	// The put may be applied twice: A's request, held as A was killed, can
	// be answered as the hold ends (a put is fed at least once).
	if applied["p0"] < 1 || applied["c1"] != 1 || len(letters) != 0 {
		t.Errorf("p0 applied %d times, c1 %d times, dead letters %v; want p0 at least once, c1 once, none\nB:\n%.3000s", applied["p0"], applied["c1"], letters, bErr)
	}
}
