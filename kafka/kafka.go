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
// its connection (feed.Fence's Until), so that a process stopped between
// the two does not send it when it wakes; what is left is a stop in the
// moment between that check and the write's system call.
//
// When a partition moves away, its records waiting in the feed (for a
// retry, the limiter, an endpoint that is down) end at once, kept for the
// next owner; a revoke waits only for its requests on the wire, then
// commits.
package kafka

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed"
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
