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
	p *partition
	r *kgo.Record
}

// maxPending is how many records a partition may have fetched and not yet
// handed to the feed before its fetching pauses.
const maxPending = 256

// poll fetches records until ctx ends and has the owner take them. The
// client holds rebalances from each poll until AllowRebalance
// (kgo.BlockRebalanceOnPoll), so that the owner takes the records of the
// partitions it still has.
func (m *member) poll(ctx context.Context) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			m.cl.AllowRebalance()
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
		m.do(func() { m.take(fs) })
		m.cl.AllowRebalance()
	}
}

// take adds the records fetched to their partitions' pending queues, and
// pauses the fetching of a partition whose queue is full. The owner's.
func (m *member) take(fs kgo.Fetches) {
	var full []int32
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		pt := m.parts[ftp.Partition]
		if pt == nil || pt.ctx.Err() != nil {
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
		if !pt.paused && len(pt.pending) >= maxPending {
			pt.paused = true
			full = append(full, pt.id)
		}
	})
	if len(full) > 0 {
		m.cl.PauseFetchPartitions(map[string][]int32{m.cfg.Topic: full})
	}
	m.publishLags()
}
