package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seed32e55400/retries/feed"
)

// ops yields the operations of the records the owner hands out,
// dead-lettering those that are not valid operations, until m.items is
// closed (when ctx ends: then what is fetched but not handed out is left to
// the next owner).
func (m *member) ops(ctx context.Context) func(func(feed.Operation, error) bool) {
	return func(yield func(feed.Operation, error) bool) {
		for it := range m.items {
			if ctx.Err() != nil || it.p.ctx.Err() != nil {
				// Stopping, or its partition moved away since it was
				// handed out: neither fed nor dead-lettered here.
				m.finish(it, feed.Result{}, false)
				continue
			}
			op, err := m.parseRecord(it.r)
			if err != nil {
				m.deadLetter(it, "not a valid operation: "+err.Error())
				continue
			}
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
// A revoke waiting for the record's partition no longer waits for it.
func (m *member) finish(it item, res feed.Result, done bool) {
	m.post(func() {
		if ord, ok := it.p.led.Find(it.r.Offset); ok {
			switch {
			case done:
				it.p.led.Done(ord)
			case res.Attempts == 0:
				it.p.led.Unreserve(ord)
			}
		}
		if pt := it.p; pt.started[it.r.Offset] {
			delete(pt.started, it.r.Offset)
			if len(pt.started) == 0 && pt.drained != nil {
				close(pt.drained)
			}
		}
	})
}
