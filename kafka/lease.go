package kafka

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries/feed"
)

// errRevoked keeps the operations of a partition that moved to another
// member: they are that member's now.
var errRevoked = fmt.Errorf("the partition moved to another member: %w", feed.ErrNotSent)

// beforeUnsafe is the feed's BeforeUnsafe: a record not safe to repeat goes
// out once a commit lists it as reserved, not at all if the last owner may
// have sent it, and not at all once its partition has moved.
func (m *member) beforeUnsafe(ctx context.Context, op feed.Operation) error {
	it, _ := op.Tag.(item)
	if it.p == nil {
		return nil
	}
	pt := it.p
	ord, ok := pt.led.Find(it.r.Offset)
	if pt.ctx.Err() != nil || !ok { // moved away: its context ends with the revoke
		return errRevoked
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(pt.ctx, cancel)()
	err := pt.led.Reserve(ctx, ord)
	if pt.ctx.Err() != nil {
		return errRevoked
	}
	return err
}

// memberFence is the member's feed.Fence: Admit is its fence, Until its
// lease, Lifetime its partition's.
type memberFence struct{ m *member }

func (f memberFence) Admit(ctx context.Context, op feed.Operation) error { return f.m.fence(ctx, op) }
func (f memberFence) Until() time.Time                                   { return f.m.lease.deadline() }

// Lifetime is the record's partition's: when the partition moves away,
// the feed ends the record's operation as soon as none of its requests is
// on the wire (kept with errRevoked), so that a revoke waits for the
// requests on the wire alone, not for a retry's wait, the limiter or an
// outage. The feed calls it as it starts the record's operation: from
// then on, until it is finished, a revoke waits for it; one that starts
// after the revoke began is not counted, and sends nothing (Admit and
// BeforeUnsafe keep it: its partition's context has ended).
func (f memberFence) Lifetime(op feed.Operation) context.Context {
	it, _ := op.Tag.(item)
	if it.p == nil {
		return nil
	}
	f.m.do(func() {
		if it.p.ctx.Err() == nil {
			it.p.started[it.r.Offset] = true
		}
	})
	return it.p.ctx
}

// fence is the feed's Fence.Admit: a request of a record goes out only while the
// member owns the record's partition and holds the lease (see lease).
// A member whose process stalled past its session timeout wakes up before
// the group tells it that its partitions moved: its lease has run out, and
// its requests wait until a commit renews it or the partition is lost.
func (m *member) fence(ctx context.Context, op feed.Operation) error {
	it, _ := op.Tag.(item)
	if it.p == nil {
		return nil
	}
	for {
		renewed := m.lease.next() // before the deadline is read: no renewal is missed
		switch {
		case it.p.ctx.Err() != nil: // moved away: its context ends with the revoke
			return errRevoked
		case time.Now().Before(m.lease.deadline()):
			return nil
		}
		select {
		case m.asked <- struct{}{}:
		default:
		}
		select {
		case <-renewed:
		case <-it.p.ctx.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lease is the member's lease: the time the last commit that the group
// accepted was sent, plus the session timeout, before which the group
// cannot have given the member's partitions to another. A record goes
// out only before it: the fence checks it before each request, and the
// feed's connections as each write reaches them (Fence.Until), both
// without a lock, so that a process that stalled between the fence and
// the write does not send what it had let through when it wakes.
type lease struct {
	until   atomic.Int64                  // as UnixNano; 0: none yet
	renewed atomic.Pointer[chan struct{}] // closed at the next renewal
}

func newLease() *lease {
	l := &lease{}
	ch := make(chan struct{})
	l.renewed.Store(&ch)
	return l
}

// deadline returns the time until which the member may write.
func (l *lease) deadline() time.Time { return time.Unix(0, l.until.Load()) }

// next returns a channel closed at the next renewal.
func (l *lease) next() <-chan struct{} { return *l.renewed.Load() }

// renew extends the lease to until, if later; the commits call it one at a
// time.
func (l *lease) renew(until time.Time) {
	if until.UnixNano() <= l.until.Load() {
		return
	}
	l.until.Store(until.UnixNano())
	ch := make(chan struct{})
	close(*l.renewed.Swap(&ch))
}
