package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrGroupRefused is why a member stopped when the group refused it for
// good: a session timeout out of the brokers' range, a group id they do
// not take, or no right to the group. Run returns an error that matches
// it, and the brokers' error.
var ErrGroupRefused = errors.New("kafka: the group refused the member")

// groupRefused reports whether err is a refusal of the group that joining
// again cannot change.
func groupRefused(err error) bool {
	return errors.Is(err, kerr.InvalidSessionTimeout) || errors.Is(err, kerr.InvalidGroupID) || errors.Is(err, kerr.GroupAuthorizationFailed)
}

// item is a fetched record and its partition's state.
type item struct {
	p   *partition
	r   *kgo.Record
	fed bool // handed to the feed: its partition counts it in inFeed until it is done or kept
}

// maxPending is how many records a partition may have fetched and not yet
// handed to the feed before its fetching pauses.
const maxPending = 256

// poll fetches records into each partition's pending queue until ctx ends,
// pausing the fetching of a partition whose queue is full.
func (m *member) poll(ctx context.Context) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled):
			case groupRefused(err):
				m.stop(fmt.Errorf("%w: %w", ErrGroupRefused, err))
			case t == "":
				// The group's, which the client's log says.
			default:
				fmt.Fprintf(m.log, "retries-kafka: fetching %s/%d: %v\n", t, p, err)
			}
		})
		m.mu.Lock()
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			pt := m.parts[ftp.Partition]
			if pt == nil || pt.revoked {
				return
			}
			pt.hwm = max(pt.hwm, ftp.HighWatermark)
			for _, r := range ftp.Records {
				if r.Offset < pt.next {
					continue
				}
				pt.led.Add(r.Offset, 0)
				pt.pending = append(pt.pending, r)
				pt.next = r.Offset + 1
			}
		})
		m.mu.Unlock()
		m.setPaused(func(pt *partition) bool { return len(pt.pending) >= maxPending }, true)
		select {
		case m.ready <- struct{}{}:
		default:
		}
	}
}

// merge hands the pending records to m.items, one partition after the other
// in turn, so that a partition taken over is fed within a round even when the
// others have a backlog; it resumes the fetching of a partition whose queue
// has half emptied. It closes m.items when ctx ends.
func (m *member) merge(ctx context.Context) {
	defer close(m.items)
	last := int32(-1)
	for {
		m.mu.Lock()
		pt := m.nextPending(last)
		var r *kgo.Record
		resume := false
		if pt != nil {
			r, pt.pending = pt.pending[0], pt.pending[1:]
			last = pt.id
			resume = pt.paused && len(pt.pending) <= maxPending/2
		}
		m.mu.Unlock()
		if pt == nil {
			select {
			case <-m.ready:
				continue
			case <-ctx.Done():
				return
			}
		}
		if resume {
			m.setPaused(func(pt *partition) bool { return len(pt.pending) <= maxPending/2 }, false)
		}
		select {
		case m.items <- item{p: pt, r: r}:
		case <-ctx.Done():
			return
		}
	}
}

// setPaused pauses (or resumes) the fetching of the partitions that are not
// paused (or are) and for which which says so. Decisions and the client's
// calls are made under pauseMu, so that a pause and a resume of one
// partition never cross; the client is called without m.mu held.
func (m *member) setPaused(which func(*partition) bool, pause bool) {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	var ps []int32
	m.mu.Lock()
	for _, pt := range m.parts {
		if pt.paused != pause && !pt.revoked && which(pt) {
			pt.paused = pause
			ps = append(ps, pt.id)
		}
	}
	m.mu.Unlock()
	switch {
	case len(ps) == 0:
	case pause:
		m.cl.PauseFetchPartitions(map[string][]int32{m.cfg.Topic: ps})
	default:
		m.cl.ResumeFetchPartitions(map[string][]int32{m.cfg.Topic: ps})
	}
}

// resumeGone resumes the fetching of partitions paused when they moved
// away: a pause outlives the assignment, and would hold them if they came
// back.
func (m *member) resumeGone(ps []int32) {
	if len(ps) == 0 {
		return
	}
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	m.cl.ResumeFetchPartitions(map[string][]int32{m.cfg.Topic: ps})
}

// nextPending returns the partition after last, in the order of their ids
// and round, that has a record pending, or nil. m.mu is held.
func (m *member) nextPending(last int32) *partition {
	var first, next *partition
	for id, pt := range m.parts {
		if len(pt.pending) == 0 || pt.revoked {
			continue
		}
		if first == nil || id < first.id {
			first = pt
		}
		if id > last && (next == nil || id < next.id) {
			next = pt
		}
	}
	if next != nil {
		return next
	}
	return first
}
