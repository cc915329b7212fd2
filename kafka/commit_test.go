package kafka

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

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
// reservation, not the periodic one's, which reserved records this member
// never sent.
func TestCommitsLandInPlanOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMember(Config{Topic: opsTopic})
		l := &landing{release: make(chan struct{})}
		m.commitOffsets = l.commit
		m.parts[0] = &partition{id: 0, known: true, committed: -1, next: 100, fed: 100, fedSince: 100}
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() { m.commit(ctx, nil, false) }) // reserves 100 + 150
		synctest.Wait()
		m.mu.Lock()
		m.parts[0].revoked = true
		m.mu.Unlock()
		wg.Go(func() { m.commit(ctx, map[int32]bool{0: true}, false) }) // nothing in the feed: reserves only what is done
		synctest.Wait()
		close(l.release)
		wg.Wait()
		want := []string{reservedKey + "250", reservedKey + "100"}
		if len(l.meta) != 2 || l.meta[0] != want[0] || l.meta[1] != want[1] {
			t.Errorf("landed %q, want %q", l.meta, want)
		}
		if r := m.parts[0].reserved; r != 100 {
			t.Errorf("reserved %d after the revoke's commit, want 100", r)
		}
	})
}

// TestNoCommitBeforeOffsetsFetched: a partition assigned and revoked before
// its committed offset is fetched is not committed (a commit would move
// the group back to offset 0 and drop the last owner's reservation); once
// fetched, it is committed from that offset.
func TestNoCommitBeforeOffsetsFetched(t *testing.T) {
	m := newMember(Config{Topic: opsTopic})
	l := &landing{}
	m.commitOffsets = l.commit
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
