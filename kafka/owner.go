package kafka

import (
	"context"
)

// The owner is the one goroutine that changes the member's partitions
// (m.parts and each partition's fields but its ledger and its context,
// which own their synchronisation). Everything else reaches them as a
// message, a function the owner runs: the client's callbacks (assigned,
// fetched, revoked, lost) and the poll loop's fetches with do, waiting
// for it to run; the feed's outcomes and the dead letters' with post.
// The owner hands each record to the feed through m.items, a partition
// after the other in turn, so that a partition taken over is fed within
// a round even when the others have a backlog.

// own runs the owner until m.quit is closed. It hands records out until
// ctx ends, then closes m.items: the records fetched and not handed out
// are left to the next owner.
func (m *member) own(ctx context.Context) {
	handing := ctx.Done()
	for {
		var out chan<- item
		next := m.nextRecord()
		if next.p != nil && handing != nil {
			out = m.items
		}
		select {
		case f := <-m.inbox:
			f()
		case out <- next:
			m.handedOut(next)
		case <-handing:
			handing = nil
			close(m.items)
		case <-m.quit:
			return
		}
	}
}

// do runs f on the owner's goroutine and waits for it; it reports false,
// without running f, once the owner has stopped.
func (m *member) do(f func()) bool {
	ran := make(chan struct{})
	select {
	case m.inbox <- func() { f(); close(ran) }:
	case <-m.quit:
		return false
	}
	select {
	case <-ran:
		return true
	case <-m.quit:
		return false
	}
}

// post has f run on the owner's goroutine, without waiting for it; once
// the owner has stopped, f is dropped.
func (m *member) post(f func()) {
	select {
	case m.inbox <- f:
	case <-m.quit:
	}
}

// nextRecord returns the record to hand out next: the first pending of
// the partition after the last one served, in the order of their ids and
// round, skipping the records that the last owner reserved and finished
// past the committed offset (they were applied, or reported); a zero item
// if none. The owner's.
func (m *member) nextRecord() item {
	for {
		pt := m.nextPending()
		if pt == nil {
			return item{}
		}
		r := pt.pending[0]
		if ord, found := pt.led.Find(r.Offset); found && !pt.led.EndedBefore(ord) {
			return item{p: pt, r: r}
		}
		m.shift(pt) // done: no owner feeds it again
	}
}

// handedOut notes that the feed has the record of it.
func (m *member) handedOut(it item) {
	m.shift(it.p)
	m.last = it.p.id
}

// nextPending returns the partition after m.last, in the order of their
// ids and round, that has a record pending, or nil. The owner's.
func (m *member) nextPending() *partition {
	var first, next *partition
	for id, pt := range m.parts {
		if len(pt.pending) == 0 {
			continue
		}
		if first == nil || id < first.id {
			first = pt
		}
		if id > m.last && (next == nil || id < next.id) {
			next = pt
		}
	}
	if next != nil {
		return next
	}
	return first
}

// shift drops pt's first pending record, and resumes the fetching of pt,
// paused when its queue was full, once the queue has half emptied. The
// owner's.
func (m *member) shift(pt *partition) {
	pt.pending = pt.pending[1:]
	if pt.paused && len(pt.pending) <= maxPending/2 {
		pt.paused = false
		m.cl.ResumeFetchPartitions(map[string][]int32{m.cfg.Topic: {pt.id}})
	}
}

// publishLags stores the lag of each partition for Stats, which any
// goroutine reads. The owner's.
func (m *member) publishLags() {
	lags := make(map[int32]int64, len(m.parts))
	for p, pt := range m.parts {
		lags[p] = max(0, pt.hwm-max(pt.committed, 0))
	}
	m.lagsNow.Store(&lags)
}
