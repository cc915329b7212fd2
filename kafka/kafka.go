// Package kafka feeds Vespa from a Kafka topic as a member of a consumer
// group, through the retry layers of package feed, and commits an offset
// only once every record below it is acknowledged or dead-lettered.
//
// Each record's value is one feed operation in Vespa's JSON, read by the
// feed's strict reader; its key is free, but producers should key records by
// document id, so that the operations on one document share a partition and
// keep their order. Kafka's consumer-group protocol spreads the topic's
// partitions over the members; each member feeds through its own
// feed.Client, with its own limiter, breaker and budget.
//
// A record that fails, or is not a valid operation, is dead-lettered: produced
// to Config.FailedTopic with its key, value and headers and a header
// retries-failed-reason, or appended to Config.Failed. While the feed is
// paused by an outage, the member stops fetching and commits nothing new.
//
// An operation not safe to repeat (an arithmetic or conditional update) goes
// out only once the group's committed metadata for its partition lists its
// offset as reserved; the records about to go out are committed together. A
// member that takes a partition over reports each such record that the last
// owner reserved and did not finish as of unknown outcome (dead-lettered, not
// sent again), so that no increment is applied twice after a crash.
//
// A member sends a record only while it holds a lease: the time the group
// last accepted one of its commits, plus the session timeout, before which
// the group cannot have given its partitions to another member. A member
// whose process stalled past its session timeout wakes up with its lease run
// out, and sends nothing until a commit renews it or the group takes its
// partitions, so it never overwrites what their new owner wrote. The lease
// is checked before each request and again as the request is written to
// its connection (feed.Config.Lease), so that a process stopped between
// the two does not send it when it wakes; what is left is a stop in the
// moment between that check and the write's system call.
package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/resume"
)

// Defaults of Config.
const (
	// DefaultSessionTimeout is how long the group waits for a member's
	// heartbeat before it moves the member's partitions: Kafka's smallest
	// by default (group.min.session.timeout.ms), so that a member that dies
	// is replaced within about 10 s, where franz-go's 45 s would leave its
	// partitions unfed for most of a minute. A member whose process stalls
	// longer (a long GC pause, a swapped machine) loses its partitions; the
	// records it had in flight are then fed again by the next.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultCommitInterval is the most often a member commits.
	DefaultCommitInterval = time.Second
	// ReasonHeader is the header of a dead letter that says why.
	ReasonHeader = "retries-failed-reason"
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

// errRevoked keeps the operations of a partition that moved to another
// member: they are that member's now.
var errRevoked = fmt.Errorf("the partition moved to another member: %w", feed.ErrNotSent)

// Config configures a member of a consumer group that feeds Vespa.
type Config struct {
	Brokers []string // seed brokers, HOST:PORT
	Topic   string   // the topic of feed operations
	Group   string   // the consumer group
	// Feed configures the member's feed client: the Vespa endpoint, TLS,
	// headers, MaxOutage, progress. Its Failed, Unknown, Unread,
	// BeforeUnsafe and Resumable are the member's own.
	Feed feed.Config
	// FailedTopic, if not empty, receives each dead letter; otherwise
	// Failed receives each dead letter's value on a line. One of the two
	// is required. A Failed with a Sync method (an *os.File) is synced
	// before each commit.
	FailedTopic string
	Failed      io.Writer
	// SessionTimeout is the group's session timeout; 0:
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// CommitInterval is the time between commits; 0:
	// DefaultCommitInterval.
	CommitInterval time.Duration
	// Progress is the time between progress lines on Log (records fed,
	// dead-lettered, commits, lag); 0: none.
	Progress time.Duration
	// Log receives what the member does (its assignments, revokes, dead
	// letters), and what the feed says when Feed.Log is nil; nil: Feed.Log.
	Log io.Writer
	// ClientOpts are more options for the Kafka client (TLS, SASL).
	ClientOpts []kgo.Opt
	// Tombstones says what a record with a null value (a compacted
	// topic's delete) becomes: TombstonesDeadLetter (the zero value), or
	// TombstonesRemove, a remove of the document whose id is the record's
	// key.
	Tombstones Tombstones
	// ProgressJSON makes each progress report one line of JSON: the
	// Summary's keys so far, and kafka.lag.partitions, the lag of each
	// partition by its number.
	ProgressJSON bool
	// StartAtEnd makes a group with no committed offset for a partition
	// start at its end (the records produced from then on); by default it
	// starts at the earliest record.
	StartAtEnd bool
}

// Tombstones is what a member does with a record whose value is null.
type Tombstones int

const (
	// TombstonesDeadLetter dead-letters it, as no operation.
	TombstonesDeadLetter Tombstones = iota
	// TombstonesRemove removes the document whose id is its key.
	TombstonesRemove
)

// ErrDeadLetter is why a member stopped: a dead letter could not be
// produced or written, after retries over about a minute. Run returns an
// error that matches it, and the records from that one on stay
// uncommitted, to be fed again.
var ErrDeadLetter = errors.New("kafka: a dead letter cannot be written")

// letterWaits are the waits before each new try of a dead letter that
// could not be produced or written; after the last, the member stops with
// ErrDeadLetter.
var letterWaits = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
	1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second, 20 * time.Second}

// Report is what a member did.
type Report struct {
	Fed          int64 // records acknowledged by Vespa
	DeadLettered int64 // records produced to FailedTopic or written to Failed
	Commits      int64 // successful commits
	Lag          int64 // records of its partitions not committed, when it stopped
	Feed         feed.Report
}

// Summary returns r as one line of JSON.
func (r Report) Summary() []byte {
	b, _ := json.Marshal(map[string]int64{"kafka.fed": r.Fed, "kafka.deadlettered": r.DeadLettered,
		"kafka.commits": r.Commits, "kafka.lag": r.Lag})
	return append(b, '\n')
}

// Run feeds from cfg.Topic as a member of cfg.Group until ctx ends, as
// [Member.Run] does for New(cfg). It returns an error when cfg is not
// valid or the client cannot start.
func Run(ctx, force context.Context, cfg Config) (Report, error) {
	mb, err := New(cfg)
	if err != nil {
		return Report{}, err
	}
	return mb.Run(ctx, force)
}

// Member is one member of a consumer group that feeds Vespa, for a caller
// that reads its counts while it runs (see Stats): New makes it, and Run
// runs it, once.
type Member struct {
	m   *member
	ran atomic.Bool
}

// New returns a member of cfg.Group, with its feed client, or an error
// when cfg is not valid. It joins the group when it runs.
func New(cfg Config) (*Member, error) {
	switch {
	case len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.Group == "":
		return nil, errors.New("kafka: Brokers, Topic and Group are required")
	case cfg.FailedTopic == "" && cfg.Failed == nil:
		return nil, errors.New("kafka: FailedTopic or Failed is required: a record that fails must go somewhere")
	case cfg.FailedTopic == cfg.Topic:
		return nil, errors.New("kafka: FailedTopic must not be Topic")
	}
	m := newMember(cfg)
	m.commitOffsets = m.commitSync
	fc := cfg.Feed
	fc.Failed, fc.Unknown, fc.Unread, fc.Resumable, fc.BeforeUnsafe, fc.Fence, fc.Lease = nil, nil, nil, true, m.beforeUnsafe, m.fence, m.lease
	if fc.Log == nil {
		fc.Log = cfg.Log
	}
	var err error
	if m.fc, err = feed.New(fc); err != nil {
		return nil, err
	}
	return &Member{m: m}, nil
}

// Feed returns the member's feed client, whose Stats are the feed's
// counts (for otelretries.RegisterFeed, say).
func (mb *Member) Feed() *feed.Client { return mb.m.fc }

// Stats is a snapshot of a member's counts.
type Stats struct {
	Fed          int64 // records acknowledged by Vespa
	DeadLettered int64 // records produced to FailedTopic or written to Failed
	Commits      int64 // successful commits
	// Lag is the lag of each of the member's partitions, by number: its
	// records not committed, to its end as of its last fetch.
	Lag map[int32]int64
}

// Stats returns the member's counts so far; it may be called at any time,
// from any goroutine.
func (mb *Member) Stats() Stats {
	m := mb.m
	return Stats{Fed: m.fed.Load(), DeadLettered: m.dead.Load(), Commits: m.commits.Load(), Lag: m.lags()}
}

// Run feeds from the topic as a member of the group until ctx ends: it then
// stops fetching, finishes the operations in flight, commits, leaves the
// group and returns what it did. Canceling force (a second interrupt) stops
// the operations in flight too, after the feed's grace. Run returns an error
// when the client cannot start, or when it was called before.
func (mb *Member) Run(ctx, force context.Context) (Report, error) {
	if !mb.ran.CompareAndSwap(false, true) {
		return Report{}, errors.New("kafka: a Member runs once")
	}
	m, cfg := mb.m, mb.m.cfg
	ctx, m.stop = context.WithCancelCause(ctx)
	defer m.fc.Close()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(startOffset(cfg.StartAtEnd)),
		kgo.SessionTimeout(cmp.Or(cfg.SessionTimeout, DefaultSessionTimeout)),
		kgo.HeartbeatInterval(cmp.Or(cfg.SessionTimeout, DefaultSessionTimeout) / 6),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		kgo.OnOffsetsFetched(m.fetched),
		kgo.WithHooks(&m.brokers),
	}, cfg.ClientOpts...)
	if cfg.FailedTopic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(cfg.FailedTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
		// The producer's limit is the dead letters' topic's, so that a
		// record as large as its topic allows can be dead-lettered.
		if n := m.topicMaxBytes(ctx, cfg.FailedTopic); n > 0 {
			opts = append(opts, kgo.ProducerBatchMaxBytes(n))
		}
	}
	var err error
	if m.cl, err = kgo.NewClient(opts...); err != nil {
		return Report{}, fmt.Errorf("kafka: %w", err)
	}
	defer m.cl.Close()

	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	commitsDone := make(chan struct{})
	go func() {
		defer close(commitsDone)
		m.commitLoop(commitCtx)
	}()
	go m.poll(ctx)
	go m.merge(ctx)
	_ = m.fc.Feed(force, m.ops(ctx), m.done) // its report says what became of each
	stopCommits()
	<-commitsDone
	final := context.WithoutCancel(ctx)
	_ = m.cl.Flush(final) // the dead letters in flight
	m.commit(final, nil, true)
	lag := m.lag() // before leaving: the revoke lets every partition go
	_ = m.cl.LeaveGroupContext(final)
	res := Report{Fed: m.fed.Load(), DeadLettered: m.dead.Load(), Commits: m.commits.Load(), Lag: lag, Feed: m.fc.Report()}
	if err := context.Cause(ctx); errors.Is(err, ErrDeadLetter) || errors.Is(err, ErrBrokersOut) {
		return res, err
	}
	return res, nil
}

// startOffset is where a group with no committed offset starts.
func startOffset(atEnd bool) kgo.Offset {
	if atEnd {
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

// topicMaxBytes returns the max.message.bytes of topic, or 0 if it cannot
// be read (the producer then keeps its default, 1 MB).
func (m *member) topicMaxBytes(ctx context.Context, topic string) int32 {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.cfg.Brokers...)}, m.cfg.ClientOpts...)...)
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		fmt.Fprintf(m.log, "retries-kafka: reading the configuration of %s: %v; dead letters keep the producer's 1 MB limit\n", topic, err)
		return 0
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil {
					return int32(n)
				}
			}
		}
	}
	return 0
}

// commitLoop commits every CommitInterval (or a third of the session
// timeout, if less, so that the lease stays renewed), and soon after an
// operation asks for a reservation or waits for the lease, until ctx ends.
func (m *member) commitLoop(ctx context.Context) {
	lastProgress := time.Now()
	_ = resume.Loop{
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

// progress writes a progress report to the log.
func (m *member) progress() {
	lags := m.lags()
	lag := int64(0)
	for _, n := range lags {
		lag += n
	}
	if !m.cfg.ProgressJSON {
		line := fmt.Sprintf("retries-kafka: fed %d, dead-lettered %d, commits %d, lag %d", m.fed.Load(), m.dead.Load(), m.commits.Load(), lag)
		if cause, d := m.brokers.state(); cause != "" {
			line = fmt.Sprintf("retries-kafka: fed %d, dead-lettered %d, commits %d, lag unknown: no broker reached for %v (%s)",
				m.fed.Load(), m.dead.Load(), m.commits.Load(), d.Round(time.Second), cause)
			if m.maxOutage() > 0 {
				line += fmt.Sprintf("; stopping in %v (-max-outage)", max(m.maxOutage()-d, 0).Round(time.Second))
			}
		}
		fmt.Fprintln(m.log, line)
		return
	}
	parts := map[string]int64{}
	for p, n := range lags {
		parts[strconv.Itoa(int(p))] = n
	}
	b, _ := json.Marshal(map[string]any{"kafka.fed": m.fed.Load(), "kafka.deadlettered": m.dead.Load(),
		"kafka.commits": m.commits.Load(), "kafka.lag": lag, "kafka.lag.partitions": parts})
	fmt.Fprintf(m.log, "%s\n", b)
}

// maxOutage is how long the member waits for the brokers, as for Vespa:
// the feed's MaxOutage, 0 for ever.
func (m *member) maxOutage() time.Duration {
	switch d := m.cfg.Feed.MaxOutage; {
	case d < 0:
		return 0
	case d == 0:
		return 5 * time.Minute // the feed's default
	default:
		return d
	}
}

// session is the group's session timeout.
func (m *member) session() time.Duration { return cmp.Or(m.cfg.SessionTimeout, DefaultSessionTimeout) }

// lag returns the records of the member's partitions not committed, as of
// their last fetch.
func (m *member) lag() int64 {
	n := int64(0)
	for _, l := range m.lags() {
		n += l
	}
	return n
}

// lags returns the lag of each of the member's partitions: its records
// not committed, to its end as of its last fetch.
func (m *member) lags() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	lags := make(map[int32]int64, len(m.parts))
	for p, pt := range m.parts {
		lags[p] = max(0, pt.hwm-max(pt.committed, 0))
	}
	return lags
}

// newMember returns the member of cfg, with no client yet.
func newMember(cfg Config) *member {
	m := &member{cfg: cfg, parts: map[int32]*partition{}, renewed: make(chan struct{}), items: make(chan item, 64),
		ready: make(chan struct{}, 1), committing: make(chan struct{}, 1), asked: make(chan struct{}, 1)}
	m.cond = sync.NewCond(&m.mu)
	m.stop = func(error) {}
	m.log = cmp.Or[io.Writer](cfg.Log, cfg.Feed.Log, io.Discard)
	m.brokers.log = m.log
	return m
}

// member is one member of the group.
type member struct {
	cfg Config
	cl  *kgo.Client
	fc  *feed.Client
	log io.Writer

	brokers brokerHealth // a kgo hook

	mu    sync.Mutex
	cond  *sync.Cond // broadcast when a record is done or kept, for a revoke
	parts map[int32]*partition
	// The lease: a record goes out only until leaseUntil, the time the
	// last commit that the group accepted was sent plus the session
	// timeout, since the group cannot have moved the member's partitions
	// before then. renewed is closed when it is renewed.
	leaseUntil time.Time
	renewed    chan struct{}
	asked      chan struct{} // a reservation or the lease waits for a commit

	items chan item     // fetched records, to the feed
	ready chan struct{} // a fetch added pending records

	failedMu sync.Mutex // the Failed writer's
	// committing is held from a commit's plan until it has landed, so that
	// commits land in the order of their plans: a periodic commit planned
	// before a revoke and landing after the revoke's would pass on a
	// reservation the member no longer keeps.
	committing chan struct{}
	// commitOffsets commits offsets, with meta as each partition's
	// metadata, and returns the partitions refused.
	commitOffsets func(ctx context.Context, offsets map[int32]kgo.EpochOffset, meta map[int32]string) (failed map[int32]error, err error)
	pauseMu       sync.Mutex // held while fetching is paused or resumed: see setPaused

	fed, dead, commits atomic.Int64
	stop               context.CancelCauseFunc // stops the member, with ErrDeadLetter
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
			if !errors.Is(err, context.Canceled) {
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

// ops yields the operations of the fetched records, dead-lettering those
// that are not valid operations, until m.items is closed or ctx ends (then
// what is fetched but not yielded is left to the next owner).
func (m *member) ops(ctx context.Context) func(func(feed.Operation, error) bool) {
	return func(yield func(feed.Operation, error) bool) {
		for it := range m.items {
			if ctx.Err() != nil {
				continue // stopping: neither fed nor committed
			}
			m.mu.Lock()
			ord, found := it.p.led.Find(it.r.Offset)
			// A record that the last owner reserved and finished past the
			// committed offset was applied (or reported): it is done.
			stale := it.p.revoked || !found || it.p.led.EndedBefore(ord)
			m.mu.Unlock()
			if stale {
				continue
			}
			op, err := m.parseRecord(it.r)
			if err != nil {
				m.deadLetter(it, "not a valid operation: "+err.Error())
				continue
			}
			m.mu.Lock()
			it.fed = true
			it.p.inFeed++
			m.mu.Unlock()
			op.Tag = it
			if !yield(op, nil) {
				m.finish(it, feed.Result{}, false)
				return
			}
		}
	}
}

// parseRecord returns the operation of r: the one its value holds, or,
// for a tombstone (a null value) with Config.Tombstones TombstonesRemove,
// a remove of the document its key names.
func (m *member) parseRecord(r *kgo.Record) (feed.Operation, error) {
	if r.Value == nil && m.cfg.Tombstones == TombstonesRemove {
		// A key that is no document id fails in the feed, and is
		// dead-lettered with why.
		return feed.Operation{Kind: feed.Remove, ID: string(r.Key)}, nil
	}
	if r.Value == nil {
		return feed.Operation{}, errors.New("a tombstone (a null value)")
	}
	return parseValue(r.Value)
}

// parseValue returns the one operation that value holds.
func parseValue(value []byte) (feed.Operation, error) {
	var op feed.Operation
	n := 0
	for o, err := range feed.Read(bytes.NewReader(value)) {
		if err != nil {
			return op, err
		}
		if n++; n > 1 {
			return op, errors.New("more than one operation in the record")
		}
		op = o
	}
	if n == 0 {
		return op, errors.New("no operation in the record")
	}
	op.Line, op.Offset = 0, 0
	return op, nil
}

// done is the feed's done: an acknowledged record is done, a failed one is
// dead-lettered, and one not sent, or abandoned on the wire by a stop by
// force, is left to the next owner.
func (m *member) done(op feed.Operation, res feed.Result, err error) {
	it, _ := op.Tag.(item)
	if it.p == nil {
		return
	}
	switch {
	case err == nil:
		m.fed.Add(1)
		m.finish(it, res, true)
	case errors.Is(err, feed.ErrNotSent):
		m.finish(it, res, false)
	case errors.Is(err, feed.ErrInterrupted):
		// Stopped by force with its request on the wire: left to the next
		// owner as after a crash, which feeds it again, or, not safe to
		// repeat (its reservation is passed on), reports it. The feed's
		// own line called it failed; this one says where it went.
		fmt.Fprintf(m.log, "retries-kafka: left to the next owner: %s/%d@%d (its request was canceled by the stop)\n", it.r.Topic, it.r.Partition, it.r.Offset)
		m.finish(it, res, false)
	default:
		m.deadLetter(it, err.Error())
	}
}

// finish marks the record of it done, or, without done, kept for the next
// owner (commits stop below it): its reservation, if any, ends when no
// request of it went out (res.Attempts is 0), and is passed on otherwise.
// A record the feed had is no longer in its hands.
func (m *member) finish(it item, res feed.Result, done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ord, ok := it.p.led.Find(it.r.Offset); ok {
		switch {
		case done:
			it.p.led.Done(ord)
		case res.Attempts == 0:
			it.p.led.Unreserve(ord)
		}
	}
	if it.fed {
		it.p.inFeed--
	}
	m.cond.Broadcast()
}

// deadLetter produces the record of it to FailedTopic, or writes it to
// Failed, with reason, and then marks it done. A dead letter that cannot
// be produced or written is tried again after each of letterWaits; after
// the last, the member stops with ErrDeadLetter, the record not done (it
// is fed again by the next owner).
func (m *member) deadLetter(it item, reason string) {
	r := it.r
	fmt.Fprintf(m.log, "retries-kafka: dead letter: %s/%d@%d: %s\n", r.Topic, r.Partition, r.Offset, reason)
	m.letter(it, reason, 0)
}

// letter makes the try-th try of the dead letter of it.
func (m *member) letter(it item, reason string, try int) {
	r := it.r
	if m.cfg.FailedTopic == "" {
		m.failedMu.Lock()
		_, err := m.cfg.Failed.Write(letterLine(r, reason))
		m.failedMu.Unlock()
		m.lettered(it, reason, try, err)
		return
	}
	headers := append(append([]kgo.RecordHeader(nil), r.Headers...), kgo.RecordHeader{Key: ReasonHeader, Value: []byte(reason)})
	m.cl.Produce(context.Background(), &kgo.Record{Key: r.Key, Value: r.Value, Headers: headers}, func(_ *kgo.Record, err error) {
		m.lettered(it, reason, try, err)
	})
}

// letterLine is the line of a dead letter in Failed: one JSON object with
// the record's topic, partition, offset, key, value (its JSON as it is,
// or a string if it is not JSON; null for a tombstone) and the reason.
func letterLine(r *kgo.Record, reason string) []byte {
	value := json.RawMessage("null")
	switch {
	case r.Value == nil:
	case json.Valid(r.Value):
		var b bytes.Buffer
		_ = json.Compact(&b, r.Value)
		value = b.Bytes()
	default:
		value, _ = json.Marshal(string(r.Value))
	}
	var key any
	if r.Key != nil {
		key = string(r.Key)
	}
	line, _ := json.Marshal(struct {
		Topic     string          `json:"topic"`
		Partition int32           `json:"partition"`
		Offset    int64           `json:"offset"`
		Key       any             `json:"key"`
		Value     json.RawMessage `json:"value"`
		Reason    string          `json:"reason"`
	}{r.Topic, r.Partition, r.Offset, key, value, reason})
	return append(line, '\n')
}

// lettered ends the record of it once its dead letter is written or
// produced, or, when the try-th try failed with err, tries again later or
// stops the member.
func (m *member) lettered(it item, reason string, try int, err error) {
	if err == nil {
		m.dead.Add(1)
		m.finish(it, feed.Result{}, true)
		return
	}
	if try < len(letterWaits) {
		fmt.Fprintf(m.log, "retries-kafka: the dead letter of %s/%d@%d: %v; trying again in %v\n", it.r.Topic, it.r.Partition, it.r.Offset, err, letterWaits[try])
		time.AfterFunc(letterWaits[try], func() { m.letter(it, reason, try+1) })
		return
	}
	err = fmt.Errorf("%w: %s/%d@%d, after %d tries: %v", ErrDeadLetter, it.r.Topic, it.r.Partition, it.r.Offset, try+1, err)
	fmt.Fprintf(m.log, "retries-kafka: stopping: %v; the records from it on stay uncommitted\n", err)
	m.stop(err)
	m.finish(it, feed.Result{Attempts: 1}, false) // its reservation, if any, is passed on
}

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

// fence is the feed's Fence: a request of a record goes out only while the
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

// lease is the feed's Lease: the fence's lease, checked again as each
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
	fmt.Fprintf(m.log, "retries-kafka: lost %s %v\n", m.cfg.Topic, lost[m.cfg.Topic])
}

// commit commits, for each partition (those in only, if not nil), the
// offset below which every record is done, with the reservations of the
// records not safe to repeat that may have been sent and are not done in
// its metadata, and lets the operations whose reservations it holds go. A
// commit the group accepts renews the lease; one is made for that alone
// when the lease has less than two thirds of the session timeout left.
// The Failed file is synced first.
func (m *member) commit(ctx context.Context, only map[int32]bool, final bool) {
	type plan struct {
		pt     *partition
		offset int64
		meta   string
		snap   resume.Snapshot
	}
	select {
	case m.committing <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-m.committing }()
	var plans []plan
	m.mu.Lock()
	renew := time.Until(m.leaseUntil) < 2*m.session()/3
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
		plans = append(plans, plan{pt: pt, offset: offset, meta: meta, snap: s})
	}
	m.mu.Unlock()
	if len(plans) == 0 {
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
	m.mu.Lock()
	defer m.mu.Unlock()
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
		m.renew(sent)
	}
	m.commits.Add(1)
}

// reservedMeta is the commit metadata of the reservations, and of the
// reservations ended, as runs of offsets. Past maxReservedMeta it is one
// run of reservations over them all: the next owner then reports the
// records not safe to repeat in it as of unknown outcome, those done
// included, rather than send one again.
func reservedMeta(reserved, ended []resume.Run) string {
	var b strings.Builder
	b.WriteString(reservedKey)
	write := func(mark string, runs []resume.Run) {
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
		lo := slices.MinFunc(all, func(a, b resume.Run) int { return cmp.Compare(a[0], b[0]) })[0]
		hi := slices.MaxFunc(all, func(a, b resume.Run) int { return cmp.Compare(a[1], b[1]) })[1]
		return reservedKey + strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
	}
	return b.String()
}

// parseReserved returns the reservations that the commit metadata meta
// lists, and the reservations ended, as runs of offsets; from is the
// offset committed with it. An older member's frontier N reserves from to
// N-1.
func parseReserved(meta *string, from int64) (reserved, ended []resume.Run) {
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
				*runs = append(*runs, resume.Run{lo, hi})
			}
		}
		return reserved, ended
	case strings.HasPrefix(*meta, oldReservedKey):
		if n, err := strconv.ParseInt(strings.TrimPrefix(*meta, oldReservedKey), 10, 64); err == nil && n > from {
			return []resume.Run{{from, n - 1}}, nil
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
