package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seed32e55400/retries/feed"
)

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
	fc.Failed, fc.Unknown, fc.Unread, fc.Resumable, fc.BeforeUnsafe, fc.Fence = nil, nil, nil, true, m.beforeUnsafe, memberFence{m}
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
		kgo.BlockRebalanceOnPoll(), // the owner takes a poll's records before a rebalance moves their partitions
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		kgo.OnOffsetsFetched(m.fetched),
		kgo.WithHooks(&m.brokers),
		// What the client warns of, on the member's log: a group it
		// cannot join (a session timeout the brokers refuse, say) was
		// silent.
		kgo.WithLogger(clientLog{m.log}),
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
	owned := make(chan struct{})
	go func() {
		defer close(owned)
		m.own(ctx)
	}()
	defer func() { close(m.quit); <-owned }() // after the group is left: its revoke is the owner's too
	go m.poll(ctx)
	_ = m.fc.Feed(force, m.ops(ctx), m.done) // its report says what became of each
	stopCommits()
	<-commitsDone
	final := context.WithoutCancel(ctx)
	_ = m.cl.Flush(final) // the dead letters in flight
	m.commit(final, nil, true)
	lag := m.lag() // before leaving: the revoke lets every partition go
	_ = m.cl.LeaveGroupContext(final)
	res := Report{Fed: m.fed.Load(), DeadLettered: m.dead.Load(), Commits: m.commits.Load(), Lag: lag, Feed: m.fc.Report()}
	if err := context.Cause(ctx); errors.Is(err, ErrDeadLetter) || errors.Is(err, ErrBrokersOut) || errors.Is(err, ErrGroupRefused) {
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

// topicMaxBytes returns the largest record the brokers take in topic, as
// they describe it: the topic's max.message.bytes when the topic sets its
// own, or else the larger of what they describe for the topic and their
// message.max.bytes (a broker may describe a topic with no setting of its
// own by a default smaller than the limit it enforces, its own); 0 if
// nothing can be read (the producer then keeps its default, 1 MB). A
// record larger than the topic's own limit fails at the producer, and is
// tried again, then stops the member (ErrDeadLetter).
func (m *member) topicMaxBytes(ctx context.Context, topic string) int32 {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.cfg.Brokers...)}, m.cfg.ClientOpts...)...)
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	n, own := int64(0), false
	read := func(rcs kadm.ResourceConfigs, key string) {
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key != key || c.Value == nil {
					continue
				}
				if v, err := strconv.ParseInt(*c.Value, 10, 32); err == nil {
					n = max(n, v)
					own = own || c.Source == kmsg.ConfigSourceDynamicTopicConfig
				}
			}
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	read(rcs, "max.message.bytes")
	if own {
		return int32(n)
	}
	rcs, berr := adm.DescribeBrokerConfigs(ctx)
	read(rcs, "message.max.bytes")
	if err != nil && berr != nil {
		fmt.Fprintf(m.log, "retries-kafka: reading the configuration of %s: %v; dead letters keep the producer's 1 MB limit\n", topic, err)
	}
	return int32(n)
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

// newMember returns the member of cfg, with no client yet.
func newMember(cfg Config) *member {
	m := &member{cfg: cfg, parts: map[int32]*partition{}, last: -1, inbox: make(chan func(), 64), quit: make(chan struct{}),
		lease: newLease(), items: make(chan item), committing: make(chan struct{}, 1), asked: make(chan struct{}, 1)}
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

	// The owner's (see own): the partitions, the one served last, and
	// the messages it runs.
	parts map[int32]*partition
	last  int32
	inbox chan func()
	quit  chan struct{} // closed when the owner stops

	lagsNow atomic.Pointer[map[int32]int64] // the owner's last publishLags
	lease   *lease                          // read by the fence and the connections
	asked   chan struct{}                   // a reservation or the lease waits for a commit
	items   chan item                       // the records the owner hands to the feed

	failedMu sync.Mutex // the Failed writer's
	// committing is held from a commit's plan until it has landed, so that
	// commits land in the order of their plans: a periodic commit planned
	// before a revoke and landing after the revoke's would pass on a
	// reservation the member no longer keeps.
	committing chan struct{}
	// commitOffsets commits offsets, with meta as each partition's
	// metadata, and returns the partitions refused.
	commitOffsets func(ctx context.Context, offsets map[int32]kgo.EpochOffset, meta map[int32]string) (failed map[int32]error, err error)

	fed, dead, commits atomic.Int64
	stop               context.CancelCauseFunc // stops the member, with ErrDeadLetter
}
