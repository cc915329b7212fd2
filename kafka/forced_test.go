package kafka

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seed32e55400/retries/feed"
)

// TestForcedStopLeavesRecords: a member stopped by force (the second
// interrupt) with a put and an increment held on the wire dead-letters
// neither: they stay uncommitted, the increment's reservation with them,
// as after a crash. The next owner feeds the put again, and reports the
// increment, which may have been applied, as of unknown outcome. Both were
// dead-lettered as "interrupted", which left the put to be fed again by
// hand.
func TestForcedStopLeavesRecords(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	addrs := c.ListenAddrs()
	produceValues(t, addrs, [][]byte{
		[]byte(`{"put":"id:a:b::p0","fields":{}}`),
		[]byte(`{"update":"id:a:b::c1","fields":{"n":{"increment":1}}}`),
	}, []string{"p0", "c1"})
	v, held := holdingVespa(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	force, cancelForce := context.WithCancel(t.Context())
	done := make(chan Report, 1)
	var mu sync.Mutex
	var log strings.Builder
	go func() {
		res, err := Run(ctx, force, Config{Brokers: addrs, Topic: opsTopic, Group: "g", FailedTopic: deadTopic,
			SessionTimeout: time.Second, Feed: feed.Config{URL: v.URL, MaxOutage: -1, Grace: -1}, Log: lockedWriter{&mu, &log}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	await(t, held, v.missing) // both on the wire
	cancel()
	cancelForce()
	res := await(t, done, v.missing)
	if n := deadCount(t, addrs); n != 0 || res.DeadLettered != 0 {
		t.Fatalf("%d dead letters (report: %d) after the forced stop, want none", n, res.DeadLettered)
	}
	mu.Lock()
	said := log.String()
	mu.Unlock()
	t.Log(said)
	for _, at := range []string{"@0 ", "@1 "} {
		if !strings.Contains(said, "left to the next owner: "+opsTopic+"/0"+at) {
			t.Errorf("the log does not say that record %s was left to the next owner", at)
		}
	}
	g := c.GroupInfo("g")
	if cm := g.Commits[opsTopic][0]; cm.Offset != 0 || cm.Metadata != reservedKey+"1" {
		t.Fatalf("committed %d with %q, want 0 with the increment's reservation", cm.Offset, cm.Metadata)
	}
	v.mu.Lock()
	v.hold = nil
	v.mu.Unlock()
	close(v.release) // A's requests, canceled, are gone: nothing is answered twice
	stop := startMember(t, addrs, v, "g")
	wait, cancelWait := context.WithTimeout(t.Context(), testWait)
	defer cancelWait()
	if _, err := c.WaitGroupInfo(wait, "g", func(g *kfake.GroupInfo) bool { return g != nil && g.Commits[opsTopic][0].Offset == 2 }); err != nil {
		t.Fatalf("the next owner did not commit the partition: %v (%s)", err, v.missing())
	}
	stop()
	if n := v.counts(); n["p0"] != 1 || n["c1"] != 0 {
		t.Errorf("p0 applied %d times, c1 %d times; want 1 and 0 (reported unknown)", n["p0"], n["c1"])
	}
	if n := deadCount(t, addrs); n != 1 {
		t.Errorf("%d dead letters, want the increment's", n)
	}
}
