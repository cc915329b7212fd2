package kafka

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/resume"
)

// assigned starts the state of the partitions assigned.
func (m *member) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range assigned[m.cfg.Topic] {
		m.parts[p] = m.newPartition(p)
	}
	fmt.Fprintf(m.log, "retries-kafka: assigned %s %v\n", m.cfg.Topic, assigned[m.cfg.Topic])
}

// fetched reads the committed offsets and the reservations of the
// partitions assigned.
func (m *member) fetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := func(p int32, offset int64, meta *string) {
		pt := m.parts[p]
		if pt == nil {
			return
		}
		pt.committed, pt.known = offset, true
		pt.next = max(offset, 0)
		pt.led = resume.NewPos(parseReserved(meta, pt.next))
		pt.led.SetAsked(m.asked)
		if meta != nil {
			pt.meta = *meta
		}
	}
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
	return nil
}

// revoked lets the revoked partitions go: their records not yet fed are
// dropped, those in the feed are waited for (at most the feed's operation
// timeout), and what is done is committed.
func (m *member) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[m.cfg.Topic]
	if len(ps) == 0 {
		return
	}
	m.mu.Lock()
	only := map[int32]bool{}
	for _, p := range ps {
		if pt := m.parts[p]; pt != nil {
			pt.revoked = true
			pt.cancel()
			only[p] = true
		}
	}
	timeout := cmp.Or(m.cfg.Feed.Timeout, 2*time.Minute)
	if timeout < 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.AfterFunc(timeout, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	start := time.Now()
	for time.Since(start) < timeout && m.inFeed(only) {
		m.cond.Wait()
	}
	deadline.Stop()
	m.mu.Unlock()
	m.commit(ctx, only, false)
	m.mu.Lock()
	var paused []int32
	for p := range only {
		if m.parts[p].paused {
			paused = append(paused, p)
		}
		delete(m.parts, p)
	}
	m.mu.Unlock()
	m.resumeGone(paused)
	fmt.Fprintf(m.log, "retries-kafka: revoked %s %v\n", m.cfg.Topic, ps)
}

// inFeed reports whether the feed holds a record of the partitions in
// only. m.mu is held.
func (m *member) inFeed(only map[int32]bool) bool {
	for p := range only {
		if m.parts[p].inFeed > 0 {
			return true
		}
	}
	return false
}

// lost drops the partitions lost without a commit: another member may own
// them already.
func (m *member) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.mu.Lock()
	var paused []int32
	for _, p := range lost[m.cfg.Topic] {
		if pt := m.parts[p]; pt != nil {
			pt.revoked = true
			pt.cancel()
			if pt.paused {
				paused = append(paused, p)
			}
			delete(m.parts, p)
		}
	}
	m.mu.Unlock()
	m.resumeGone(paused)
	if ps := lost[m.cfg.Topic]; len(ps) > 0 {
		fmt.Fprintf(m.log, "retries-kafka: lost %s %v\n", m.cfg.Topic, ps)
	}
}

// partition is the state of one partition assigned.
type partition struct {
	id        int32
	led       *resume.Ledger     // the records read from the committed offset on: done, reserved
	ctx       context.Context    // ends when the partition moves away
	cancel    context.CancelFunc //
	next      int64              // the offset after the last record read
	inFeed    int                // records in the feed's hands
	committed int64              // the offset last committed (or fetched); -1: none
	meta      string             // the metadata last committed (or fetched)
	known     bool               // committed is fetched: until then nothing is committed (a commit would move the group back to 0)
	hwm       int64              // the partition's high watermark, as last fetched
	revoked   bool               // it moved away: its records are no longer this member's
	pending   []*kgo.Record      // fetched, not yet handed to the feed
	paused    bool               // its fetching is paused: pending is full
}

// newPartition returns the state of partition p assigned; its committed
// offset and its last owner's reservations come with the fetch (see
// fetched).
func (m *member) newPartition(p int32) *partition {
	pt := &partition{id: p, committed: -1, led: resume.NewPos(nil, nil)}
	pt.led.SetAsked(m.asked)
	pt.ctx, pt.cancel = context.WithCancel(context.Background())
	return pt
}
