package kafka

import (
	"context"
	"fmt"
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
	m.mu.Lock()
	revoked := pt.revoked
	ord, ok := pt.led.Find(it.r.Offset)
	m.mu.Unlock()
	if revoked || !ok {
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
// lease.
type memberFence struct{ m *member }

func (f memberFence) Admit(ctx context.Context, op feed.Operation) error { return f.m.fence(ctx, op) }
func (f memberFence) Until() time.Time                                   { return f.m.lease() }

// fence is the feed's Fence.Admit: a request of a record goes out only while the
// member owns the record's partition and holds the lease (see leaseUntil).
// A member whose process stalled past its session timeout wakes up before
// the group tells it that its partitions moved: its lease has run out, and
// its requests wait until a commit renews it or the partition is lost.
func (m *member) fence(ctx context.Context, op feed.Operation) error {
	it, _ := op.Tag.(item)
	if it.p == nil {
		return nil
	}
	for {
		m.mu.Lock()
		revoked, until, renewed := it.p.revoked, m.leaseUntil, m.renewed
		m.mu.Unlock()
		switch {
		case revoked:
			return errRevoked
		case time.Now().Before(until):
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

// lease is the feed's Fence.Until: the fence's lease, checked again as each
// request is written, so that a process that stalled between the fence
// and the write does not send what it had let through when it wakes.
func (m *member) lease() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaseUntil
}

// renew renews the lease from sent, when a commit sent then was accepted.
// m.mu is held.
func (m *member) renew(sent time.Time) {
	if until := sent.Add(m.session()); until.After(m.leaseUntil) {
		m.leaseUntil = until
		close(m.renewed)
		m.renewed = make(chan struct{})
	}
}
