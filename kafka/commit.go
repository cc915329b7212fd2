package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/internal/ledger"
)

// reservedKey prefixes the commit metadata that lists the reservations of
// a partition: the offsets of the records not safe to repeat that may have
// been sent and are not done, as runs ("12-14,21"), then, each run marked
// with a "d", those that were reserved and are done past the committed
// offset ("d17,d19-20"), which the next owner must not send again (a
// member of an earlier version skips those fields). oldReservedKey
// prefixed a frontier: every offset below it.
const (
	reservedKey    = "retries-reserved2="
	oldReservedKey = "retries-reserved="
	// maxReservedMeta bounds the metadata: runs past it are merged into
	// one, from the first to the last (brokers allow 4 KiB by default).
	maxReservedMeta = 3000
)

// commitLoop commits every CommitInterval (or a third of the session
// timeout, if less, so that the lease stays renewed), and soon after an
// operation asks for a reservation or waits for the lease, until ctx ends.
func (m *member) commitLoop(ctx context.Context) {
	lastProgress := time.Now()
	_ = ledger.Loop{
		Every: min(cmp.Or(m.cfg.CommitInterval, DefaultCommitInterval), m.session()/3),
		Asked: m.asked, // the operations that ask meanwhile join the commit, 10 ms after the one before
		Commit: func(ctx context.Context) error {
			if cause, d := m.brokers.state(); cause != "" && m.maxOutage() > 0 && d > m.maxOutage() {
				m.stop(fmt.Errorf("%w (%v): %s", ErrBrokersOut, m.maxOutage(), cause))
			}
			m.commit(ctx, nil, false) // says its own errors
			if p := m.cfg.Progress; p > 0 && time.Since(lastProgress) >= p {
				lastProgress = time.Now()
				m.progress()
			}
			return nil
		},
	}.Run(ctx)
}

// commit commits, for each partition (those in only, if not nil), the
// offset below which every record is done, with the reservations of the
// records not safe to repeat that may have been sent and are not done in
// its metadata, and lets the operations whose reservations it holds go. A
// commit the group accepts renews the lease; one is made for that alone
// when the lease has less than two thirds of the session timeout left.
// The Failed file is synced first. The owner plans it and takes what
// landed; the commit itself goes out from the caller's goroutine.
func (m *member) commit(ctx context.Context, only map[int32]bool, final bool) {
	select {
	case m.committing <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-m.committing }()
	var plans []commitPlan
	if !m.do(func() { plans = m.plan(only, final) }) || len(plans) == 0 {
		return
	}
	if s, ok := m.cfg.Failed.(interface{ Sync() error }); ok && m.cfg.FailedTopic == "" {
		m.failedMu.Lock()
		err := s.Sync()
		m.failedMu.Unlock()
		if err != nil {
			fmt.Fprintf(m.log, "retries-kafka: syncing the dead letters: %v; not committing\n", err)
			return
		}
	}
	offsets := map[int32]kgo.EpochOffset{}
	meta := map[int32]string{}
	for _, pl := range plans {
		offsets[pl.pt.id] = kgo.EpochOffset{Epoch: -1, Offset: pl.offset}
		meta[pl.pt.id] = pl.meta
	}
	sent := time.Now()
	failed, cerr := m.commitOffsets(ctx, offsets, meta)
	if cerr != nil {
		fmt.Fprintf(m.log, "retries-kafka: committing: %v\n", cerr)
		return
	}
	m.do(func() { m.landed(plans, failed, sent) })
}

// commitPlan is what a commit commits of one partition.
type commitPlan struct {
	pt     *partition
	offset int64
	meta   string
	snap   ledger.Snapshot
}

// plan returns what a commit of the partitions (those in only, if not nil)
// commits: none of those whose committed offset and metadata the group
// holds already, unless the commit is final, for a revoke or for the
// lease. The owner's.
func (m *member) plan(only map[int32]bool, final bool) []commitPlan {
	var plans []commitPlan
	renew := time.Until(m.lease.deadline()) < 2*m.session()/3
	for p, pt := range m.parts {
		if (only != nil && !only[p]) || !pt.known {
			continue // not this commit's, or its committed offset is not fetched yet
		}
		s := pt.led.Snapshot()
		offset := pt.next // every record read is done
		if !s.AllDone {
			offset = s.Pos
		}
		meta := reservedMeta(s.ReservedPos, s.EndedPos)
		if offset == pt.committed && meta == pt.meta && !final && only == nil && !renew {
			pt.led.Committed(s) // the group holds it already
			continue
		}
		plans = append(plans, commitPlan{pt: pt, offset: offset, meta: meta, snap: s})
	}
	return plans
}

// landed takes what a commit sent at sent landed: the group holds the
// plans but those failed, and, if it accepted one, renews the lease. The
// owner's.
func (m *member) landed(plans []commitPlan, failed map[int32]error, sent time.Time) {
	accepted := false
	for _, pl := range plans {
		if err := failed[pl.pt.id]; err != nil {
			fmt.Fprintf(m.log, "retries-kafka: committing %s/%d: %v\n", m.cfg.Topic, pl.pt.id, err)
			continue
		}
		accepted = true
		pl.pt.committed, pl.pt.meta = pl.offset, pl.meta
		pl.pt.led.Committed(pl.snap)
	}
	if accepted {
		m.lease.renew(sent.Add(m.session()))
	}
	m.commits.Add(1)
	m.publishLags()
}

// reservedMeta is the commit metadata of the reservations, and of the
// reservations ended, as runs of offsets. Past maxReservedMeta it is one
// run of reservations over them all: the next owner then reports the
// records not safe to repeat in it as of unknown outcome, those done
// included, rather than send one again.
func reservedMeta(reserved, ended []ledger.Run) string {
	var b strings.Builder
	b.WriteString(reservedKey)
	write := func(mark string, runs []ledger.Run) {
		for _, r := range runs {
			if b.Len() > len(reservedKey) {
				b.WriteByte(',')
			}
			b.WriteString(mark)
			b.WriteString(strconv.FormatInt(r[0], 10))
			if r[1] != r[0] {
				b.WriteByte('-')
				b.WriteString(strconv.FormatInt(r[1], 10))
			}
		}
	}
	write("", reserved)
	write("d", ended)
	if b.Len() > maxReservedMeta { // one run over them all: more reserved, never fewer, none ended
		all := slices.Concat(reserved, ended)
		lo := slices.MinFunc(all, func(a, b ledger.Run) int { return cmp.Compare(a[0], b[0]) })[0]
		hi := slices.MaxFunc(all, func(a, b ledger.Run) int { return cmp.Compare(a[1], b[1]) })[1]
		return reservedKey + strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
	}
	return b.String()
}

// parseReserved returns the reservations that the commit metadata meta
// lists, and the reservations ended, as runs of offsets; from is the
// offset committed with it. An older member's frontier N reserves from to
// N-1.
func parseReserved(meta *string, from int64) (reserved, ended []ledger.Run) {
	if meta == nil {
		return nil, nil
	}
	switch {
	case strings.HasPrefix(*meta, reservedKey):
		for _, f := range strings.Split(strings.TrimPrefix(*meta, reservedKey), ",") {
			runs := &reserved
			if rest, ok := strings.CutPrefix(f, "d"); ok {
				f, runs = rest, &ended
			}
			a, b, isRun := strings.Cut(f, "-")
			lo, err1 := strconv.ParseInt(a, 10, 64)
			hi, err2 := lo, error(nil)
			if isRun {
				hi, err2 = strconv.ParseInt(b, 10, 64)
			}
			if err1 == nil && err2 == nil && lo <= hi {
				*runs = append(*runs, ledger.Run{lo, hi})
			}
		}
		return reserved, ended
	case strings.HasPrefix(*meta, oldReservedKey):
		if n, err := strconv.ParseInt(strings.TrimPrefix(*meta, oldReservedKey), 10, 64); err == nil && n > from {
			return []ledger.Run{{from, n - 1}}, nil
		}
	}
	return nil, nil
}

// commitSync is commitOffsets through the member's client.
func (m *member) commitSync(ctx context.Context, offsets map[int32]kgo.EpochOffset, meta map[int32]string) (failed map[int32]error, cerr error) {
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				if s, ok := meta[p.Partition]; ok {
					p.Metadata = &s
				}
			}
		}
		return nil
	})
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.cfg.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if resp == nil {
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						if failed == nil {
							failed = map[int32]error{}
						}
						failed[p.Partition] = err
					}
				}
			}
		})
	return failed, cerr
}
