package kafka

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/internal/ledger"
)

// assigned starts the state of the partitions assigned.
func (m *member) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.do(func() {
		for _, p := range assigned[m.cfg.Topic] {
			m.parts[p] = m.newPartition(p)
		}
		m.publishLags()
	})
	fmt.Fprintf(m.log, "retries-kafka: assigned %s %v\n", m.cfg.Topic, assigned[m.cfg.Topic])
}

// fetched reads the committed offsets and the reservations of the
// partitions assigned.
func (m *member) fetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	set := func(p int32, offset int64, meta *string) {
		pt := m.parts[p]
		if pt == nil {
			return
		}
		pt.committed, pt.known = offset, true
		pt.next = max(offset, 0)
		pt.led = ledger.NewPos(parseReserved(meta, pt.next))
		pt.led.SetAsked(m.asked)
		if meta != nil {
			pt.meta = *meta
		}
	}
	m.do(func() {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				set(p.Partition, p.Offset, p.Metadata)
			}
		}
		for _, g := range resp.Groups {
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					set(p.Partition, p.Offset, p.Metadata)
				}
			}
		}
		m.publishLags()
	})
	return nil
}

// revoked lets the revoked partitions go: their records not yet handed to
// the feed are dropped, those the feed holds without a request on the
// wire end at once (kept: memberFence.Lifetime), those on the wire are
// waited for (at most the feed's operation timeout), and what is done is
// committed. The poll loop is held meanwhile (kgo.BlockRebalanceOnPoll):
// no fetch of theirs comes.
func (m *member) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[m.cfg.Topic]
	if len(ps) == 0 {
		return
	}
	only := map[int32]bool{}
	var drained []chan struct{}
	m.do(func() {
		for _, p := range ps {
			if pt := m.parts[p]; pt != nil {
				only[p] = true
				drained = append(drained, m.letGo(pt))
			}
		}
	})
	timeout := cmp.Or(m.cfg.Feed.Timeout, 2*time.Minute)
	if timeout < 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, ch := range drained {
		select {
		case <-ch:
		case <-deadline.C:
		}
	}
	m.commit(ctx, only, false)
	m.do(func() { m.drop(ps) })
	fmt.Fprintf(m.log, "retries-kafka: revoked %s %v\n", m.cfg.Topic, ps)
}

// lost drops the partitions lost without a commit: another member may own
// them already.
func (m *member) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	ps := lost[m.cfg.Topic]
	m.do(func() {
		for _, p := range ps {
			if pt := m.parts[p]; pt != nil {
				m.letGo(pt)
			}
		}
		m.drop(ps)
	})
	if len(ps) > 0 {
		fmt.Fprintf(m.log, "retries-kafka: lost %s %v\n", m.cfg.Topic, ps)
	}
}

// letGo ends pt's context, so that its records in the feed go no more
// (the fence keeps them, and ends those waiting), drops its records not
// handed out, and returns a channel closed once none of its records is
// started in the feed: those the feed has and has not started are kept
// as they start (see started). The owner's.
func (m *member) letGo(pt *partition) chan struct{} {
	pt.cancel(errRevoked)
	pt.pending = nil
	if pt.drained == nil {
		pt.drained = make(chan struct{})
		if len(pt.started) == 0 {
			close(pt.drained)
		}
	}
	return pt.drained
}

// drop forgets the partitions ps, and resumes the fetching of those paused
// when they moved away: a pause outlives the assignment, and would hold
// them if they came back. The owner's.
func (m *member) drop(ps []int32) {
	var paused []int32
	for _, p := range ps {
		if pt := m.parts[p]; pt != nil {
			if pt.paused {
				paused = append(paused, p)
			}
			delete(m.parts, p)
		}
	}
	if len(paused) > 0 {
		m.cl.ResumeFetchPartitions(map[string][]int32{m.cfg.Topic: paused})
	}
	m.publishLags()
}

// partition is the state of one partition assigned: the owner's, but
// for led and ctx, which the feed's goroutines read too.
type partition struct {
	id        int32
	led       *ledger.Ledger          // the records read from the committed offset on: done, reserved
	ctx       context.Context         // ends when the partition moves away
	cancel    context.CancelCauseFunc // with errRevoked
	next      int64                   // the offset after the last record read
	started   map[int64]bool          // offsets of the records the feed has started and not finished
	drained   chan struct{}           // once it moves away: closed when started is empty
	committed int64                   // the offset last committed (or fetched); -1: none
	meta      string                  // the metadata last committed (or fetched)
	known     bool                    // committed is fetched: until then nothing is committed (a commit would move the group back to 0)
	hwm       int64                   // the partition's high watermark, as last fetched
	pending   []*kgo.Record           // fetched, not yet handed to the feed
	paused    bool                    // its fetching is paused: pending is full
}

// newPartition returns the state of partition p assigned; its committed
// offset and its last owner's reservations come with the fetch (see
// fetched).
func (m *member) newPartition(p int32) *partition {
	pt := &partition{id: p, committed: -1, led: ledger.NewPos(nil, nil), started: map[int64]bool{}}
	pt.led.SetAsked(m.asked)
	pt.ctx, pt.cancel = context.WithCancelCause(context.Background())
	return pt
}
