package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed"
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
