package kafka

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/seed32e55400/retries/internal/ledger"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// landing is a commitOffsets that records what lands, in order, and holds
// the first commit until release is closed.
type landing struct {
	mu      sync.Mutex
	calls   int
	offsets []int64  // partition 0's, as landed
	meta    []string // partition 0's
	release chan struct{}
}

func (l *landing) commit(ctx context.Context, offsets map[int32]kgo.EpochOffset, meta map[int32]string) (map[int32]error, error) {
	l.mu.Lock()
	l.calls++
	first := l.calls == 1
	l.mu.Unlock()
	if first && l.release != nil {
		<-l.release
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := offsets[0]; ok {
		l.offsets = append(l.offsets, o.Offset)
		l.meta = append(l.meta, meta[0])
	}
	return nil, nil
}

// TestCommitsLandInPlanOrder: a periodic commit planned before a revoke and
// still in flight when the revoke commits lands first, and the revoke's
// plan, made after it, lands last: the group keeps the revoke's
// reservations, not the periodic one's, which listed a record this member
// never sent.
func TestCommitsLandInPlanOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(Config{Topic: opsTopic})
		l := &landing{release: make(chan struct{})}
		m.commitOffsets = l.commit
		startOwner(t, m)
		pt := m.newPartition(0)
		pt.known, pt.next = true, 110
		for o := int64(100); o < 110; o++ {
			pt.led.Add(o, 0)
		}
		m.do(func() { m.parts[0] = pt })
		ord, _ := pt.led.Find(105)
		reserved := make(chan error, 1)
		go func() { reserved <- pt.led.Reserve(t.Context(), ord) }() // a record about to go out
		synctest.Wait()
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() { m.commit(ctx, nil, false) }) // lists 105
		synctest.Wait()
		m.do(func() { m.letGo(pt) })
		pt.led.Unreserve(ord)                                           // it was not sent after all
		wg.Go(func() { m.commit(ctx, map[int32]bool{0: true}, false) }) // lists nothing
		synctest.Wait()
		close(l.release)
		wg.Wait()
		want := []string{reservedKey + "105", reservedKey}
		if len(l.meta) != 2 || l.meta[0] != want[0] || l.meta[1] != want[1] {
			t.Errorf("landed %q, want %q", l.meta, want)
		}
		if err := <-reserved; err != nil {
			t.Errorf("the reservation: %v", err)
		}
		var committed int64
		var meta string
		m.do(func() { committed, meta = pt.committed, pt.meta })
		if meta != reservedKey || committed != 100 {
			t.Errorf("after the revoke's commit: %d, %q; want 100 and no reservation", committed, meta)
		}
	})
}

// startOwner runs m's owner until the test ends.
func startOwner(t *testing.T, m *member) {
	owned := make(chan struct{})
	go func() {
		defer close(owned)
		m.own(context.Background())
	}()
	t.Cleanup(func() { close(m.quit); <-owned })
}

// TestReservedMeta: the metadata lists runs of offsets, reserved and
// ended, reads an older member's frontier, and merges runs past its bound
// into one run of reservations.
func TestReservedMeta(t *testing.T) {
	runs := []ledger.Run{{12, 14}, {20, 20}, {31, 40}}
	ended := []ledger.Run{{15, 15}, {22, 25}}
	meta := reservedMeta(runs, ended)
	if meta != reservedKey+"12-14,20,31-40,d15,d22-25" {
		t.Errorf("reservedMeta = %q", meta)
	}
	if got, gotEnded := parseReserved(&meta, 10); !slices.Equal(got, runs) || !slices.Equal(gotEnded, ended) {
		t.Errorf("parseReserved(%q) = %v, %v; want %v, %v", meta, got, gotEnded, runs, ended)
	}
	if only := reservedMeta(nil, ended); only != reservedKey+"d15,d22-25" {
		t.Errorf("reservedMeta of ended runs alone = %q", only)
	}
	old := oldReservedKey + "689"
	if got, gotEnded := parseReserved(&old, 687); !slices.Equal(got, []ledger.Run{{687, 688}}) || gotEnded != nil {
		t.Errorf("parseReserved(%q) = %v, %v; want [687 688], none ended", old, got, gotEnded)
	}
	var many []ledger.Run
	for i := range int64(1000) {
		many = append(many, ledger.Run{10 * i, 10*i + 1})
	}
	if got := reservedMeta(many[1:], many[:1]); got != reservedKey+"0-9991" {
		t.Errorf("reservedMeta of 1000 runs = %.60q…, want one run of reservations over them all", got)
	}
}

// TestNoCommitBeforeOffsetsFetched: a partition assigned and revoked before
// its committed offset is fetched is not committed (a commit would move
// the group back to offset 0 and drop the last owner's reservation); once
// fetched, it is committed from that offset.
func TestNoCommitBeforeOffsetsFetched(t *testing.T) {
	m := newMember(Config{Topic: opsTopic})
	l := &landing{}
	m.commitOffsets = l.commit
	startOwner(t, m)
	ctx := context.Background()
	assigned := map[string][]int32{opsTopic: {0}}
	m.assigned(ctx, nil, assigned)
	m.revoked(ctx, nil, assigned)
	if l.calls != 0 {
		t.Errorf("%d commits of a partition whose offset was not fetched (offsets %v), want none", l.calls, l.offsets)
	}

	m.assigned(ctx, nil, assigned)
	resp := kmsg.NewPtrOffsetFetchResponse()
	topic := kmsg.NewOffsetFetchResponseTopic()
	topic.Topic = opsTopic
	p := kmsg.NewOffsetFetchResponseTopicPartition()
	p.Partition, p.Offset = 0, 7
	topic.Partitions = append(topic.Partitions, p)
	resp.Topics = append(resp.Topics, topic)
	if err := m.fetched(ctx, nil, resp); err != nil {
		t.Fatal(err)
	}
	m.revoked(ctx, nil, assigned)
	if len(l.offsets) != 1 || l.offsets[0] != 7 {
		t.Errorf("committed %v after the fetch, want [7]", l.offsets)
	}
}
