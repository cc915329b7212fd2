package ledger

import (
	"context"
	"time"
)

// Loop commits a job's state while the job runs: every Every, and, when a
// value arrives on Asked (an element waits for a reservation), Group after
// the commit before, so that the elements that ask meanwhile go together,
// with one write for all (a group commit). Commit takes the snapshot,
// makes durable what it covers (the job's side files first, then the
// store) and tells the ledgers what was committed.
//
// The zero values of Every and Group mean 1 s and 10 ms.
type Loop struct {
	Every time.Duration
	Group time.Duration
	// Asked, if not nil, holds a value while a reservation waits for a
	// commit: Ledger.Asked, or a channel ledgers share (Ledger.SetAsked).
	Asked <-chan struct{}
	// Commit makes one commit. An error does not stop the loop: the next
	// commit tries again. It runs on Run's goroutine, one at a time.
	Commit func(ctx context.Context) error
}

// Default intervals of a Loop.
const (
	DefaultEvery = time.Second
	DefaultGroup = 10 * time.Millisecond
)

// Run commits until ctx ends, and returns the first error a commit
// returned, or nil. It makes no commit when it starts, nor after ctx ends:
// the caller commits first and last, as it needs.
func (l Loop) Run(ctx context.Context) error {
	every, group := l.Every, l.Group
	if every <= 0 {
		every = DefaultEvery
	}
	if group <= 0 {
		group = DefaultGroup
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var first error
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return first
		case <-t.C:
		case <-l.Asked:
			// Let the elements about to ask join this commit.
			if wait := group - time.Since(last); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return first
				}
			}
		}
		last = time.Now()
		if err := l.Commit(ctx); err != nil && first == nil {
			first = err
		}
	}
}
