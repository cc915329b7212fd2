package ledger

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Run is a run of ordinals, first to last inclusive.
type Run [2]int64

// Ledger keeps account of a stream of elements fed in order while their
// outcomes come back in any order: which are done, the watermark below
// which all are, and which elements not safe to repeat may have been sent.
// A resumable feed keeps one per input: one for a file, one for each
// Kafka partition.
//
// Elements are numbered by ordinals, from 0 at the watermark the feed
// started from, in the order they are read; each has a position of the
// caller's (an offset, rising) and an aux value (a line). An element not
// safe to repeat goes out only once the caller's store durably records
// that it may be sent (a reservation): Reserve asks, and waits until a
// snapshot that holds the request is committed. After a crash, the
// reservations on record that are not done are exactly the elements that
// may have been applied: the resumed feed reports them as of unknown
// outcome and sends none of them again.
//
// Its methods are safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	first   int64   // the ordinal of entries[0]
	entries []entry // from the watermark on, in ordinal order
	carried []int64 // reservations of an earlier feed by ordinal, not yet read, rising
	prevPos []Run   // reservations of an earlier feed by position, rising
	prevEnd []Run   // reserved elements an earlier feed finished, by position, rising
	lastPos int64   // the position of the last element read; -1 before any

	gen     uint64        // the last snapshot's generation
	durable uint64        // the last committed snapshot's generation
	commit  chan struct{} // closed at each commit
	asked   chan struct{} // holds a token while a reservation waits for a snapshot
}

type entry struct {
	pos  int64
	aux  int
	done bool
	// gen is 0 for an element not reserved, or the generation of the
	// first snapshot that holds its reservation; carried reservations
	// have generation 1, durable from the start.
	gen     uint64
	carried bool // an earlier feed reserved it
	ended   bool // an earlier feed reserved and finished it
}

// New returns a ledger that resumes from an earlier feed's reservations:
// the ordinals (from the same watermark) that it may have sent and did
// not finish, which SentBefore then reports. prev may be nil.
func New(prev []Run) *Ledger {
	l := newLedger()
	for _, r := range prev {
		for o := r[0]; o <= r[1]; o++ {
			l.carried = append(l.carried, o)
		}
	}
	return l
}

// NewPos is New for an earlier feed's reservations given by position (a
// Kafka partition's offsets): each run covers the elements whose
// positions lie in it. ended are the positions of the elements that the
// earlier feed reserved and finished past its watermark (see
// Snapshot.EndedPos): they are read as done, and EndedBefore reports them.
func NewPos(prev, ended []Run) *Ledger {
	l := newLedger()
	l.prevPos = slices.Clone(prev)
	l.prevEnd = slices.Clone(ended)
	return l
}

func newLedger() *Ledger {
	return &Ledger{commit: make(chan struct{}), asked: make(chan struct{}, 1), gen: 1, durable: 1, lastPos: -1}
}

// Add records the next element read, at pos with aux, and returns its
// ordinal. Positions must rise.
func (l *Ledger) Add(pos int64, aux int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ord := l.first + int64(len(l.entries))
	e := entry{pos: pos, aux: aux}
	for len(l.carried) > 0 && l.carried[0] < ord {
		l.carried = l.carried[1:]
	}
	if len(l.carried) > 0 && l.carried[0] == ord {
		e.carried = true
		l.carried = l.carried[1:]
	}
	for len(l.prevPos) > 0 && l.prevPos[0][1] < pos {
		l.prevPos = l.prevPos[1:]
	}
	if len(l.prevPos) > 0 && l.prevPos[0][0] <= pos {
		e.carried = true
	}
	for len(l.prevEnd) > 0 && l.prevEnd[0][1] < pos {
		l.prevEnd = l.prevEnd[1:]
	}
	if len(l.prevEnd) > 0 && l.prevEnd[0][0] <= pos {
		e.ended, e.done, e.carried = true, true, false
	}
	if e.carried || e.ended {
		e.gen = 1 // an earlier feed's reservation stands until it is done, and is listed as ended after
	}
	l.lastPos = pos
	l.entries = append(l.entries, e)
	return ord
}

// Find returns the ordinal of the element at pos, read and not yet below
// the watermark, or false.
func (l *Ledger) Find(pos int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.find(pos)
	return l.first + int64(i), ok
}

func (l *Ledger) find(pos int64) (int, bool) {
	return slices.BinarySearchFunc(l.entries, pos, func(e entry, pos int64) int {
		switch {
		case e.pos < pos:
			return -1
		case e.pos > pos:
			return 1
		}
		return 0
	})
}

// entry returns the entry of ord, or nil if it is below the watermark or
// not read. l.mu is held.
func (l *Ledger) entry(ord int64) *entry {
	i := ord - l.first
	if i < 0 || i >= int64(len(l.entries)) {
		return nil
	}
	return &l.entries[i]
}

// Done records that the element ord is done: its outcome is final, and
// whatever the caller wrote of it is written. Its reservation ends.
func (l *Ledger) Done(ord int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entry(ord); e != nil {
		e.done = true
	}
}

// SentBefore reports whether an earlier feed reserved ord: it may have
// been sent, and must not be sent again.
func (l *Ledger) SentBefore(ord int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(ord)
	return e != nil && e.carried
}

// EndedBefore reports whether an earlier feed reserved ord and finished
// it (see NewPos): it is done, and must be neither sent nor reported
// again.
func (l *Ledger) EndedBefore(ord int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(ord)
	return e != nil && e.ended
}

// ErrSentBefore is why an element not safe to repeat is not sent: an
// earlier run reserved it, and may have sent it. Its outcome is unknown.
var ErrSentBefore = errors.New("it may have been in flight when an earlier run stopped")

// Reserve asks for the element ord to be reserved and waits until a
// committed snapshot holds the reservation, or ctx ends. A reservation
// already durable returns at once. An element that an earlier run
// reserved (SentBefore) is not reserved again: Reserve returns
// ErrSentBefore, and the caller does not send it.
func (l *Ledger) Reserve(ctx context.Context, ord int64) error {
	l.mu.Lock()
	e := l.entry(ord)
	if e == nil {
		l.mu.Unlock()
		return nil // below the watermark: done
	}
	if e.carried {
		l.mu.Unlock()
		return ErrSentBefore
	}
	if e.gen == 0 {
		e.gen = l.gen + 1
		select {
		case l.asked <- struct{}{}:
		default:
		}
	} else if e.gen <= l.durable {
		l.mu.Unlock()
		return nil
	}
	gen := e.gen
	for l.durable < gen {
		commit := l.commit
		l.mu.Unlock()
		select {
		case <-commit:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	return nil
}

// Unreserve ends the reservation of ord, an element not sent after all.
func (l *Ledger) Unreserve(ord int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entry(ord); e != nil && e.gen > 1 {
		e.gen = 0
	}
}

// Asked returns a channel that holds a value while a reservation waits
// for a snapshot: the caller's writer takes one (Snapshot, store,
// Committed) when it can.
func (l *Ledger) Asked() <-chan struct{} { return l.asked }

// SetAsked makes ch, which several ledgers may share (a buffer of one),
// the channel Asked returns. It is called before any Reserve.
func (l *Ledger) SetAsked(ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = ch
}

// Snapshot is the state of the ledger to store: a watermark and what is
// done and reserved past it.
type Snapshot struct {
	// Ord, Pos and Aux are the watermark: the first element not done, or
	// the last element read when every one is done; Ord is -1 when none
	// was read since the start.
	Ord, Pos int64
	Aux      int
	// Done and Reserved are runs of ordinals, from the watermark's 0:
	// the elements done, and those reserved and not done (an earlier
	// feed's included). ReservedPos are the same reservations as runs of
	// positions: each the first and last position of a run of reserved
	// elements read, or what is left past the last read of an earlier
	// feed's runs by position.
	Done, Reserved, ReservedPos []Run
	// EndedPos are runs of positions of the elements reserved and done
	// (sent and finished, or reported) past the watermark, and what is
	// left past the last read of an earlier feed's (see NewPos): a feed
	// that resumes from the watermark with Done in ordinals knows them
	// already; one that keeps only positions and reservations must be told
	// not to send them again.
	EndedPos []Run
	// AllDone reports that every element read is done.
	AllDone bool
	// Gen is the snapshot's generation, for Committed.
	Gen uint64
}

// Snapshot drops the done elements below the watermark, and returns what
// is to be stored. Once the store holds it durably, the caller calls
// Committed with it, which lets go the reservations it holds.
func (l *Ledger) Snapshot() Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.entries)-1 && l.entries[i].done {
		i++
	}
	l.first += int64(i)
	l.entries = slices.Delete(l.entries, 0, i)
	l.gen++
	s := Snapshot{Ord: -1, Gen: l.gen, AllDone: true}
	if len(l.entries) > 0 {
		e := l.entries[0]
		s.Ord, s.Pos, s.Aux = l.first, e.pos, e.aux
	}
	inRun, inEnded := false, false // the element before was reserved, or reserved and done
	for j, e := range l.entries {
		o := int64(j)
		reserved := !e.done && e.gen != 0
		ended := e.done && e.gen != 0 && j > 0 // the first is done only when all are: the watermark
		s.ReservedPos = addPos(s.ReservedPos, reserved, inRun, e.pos)
		s.EndedPos = addPos(s.EndedPos, ended, inEnded, e.pos)
		inRun, inEnded = reserved, ended
		switch {
		case e.done:
			s.Done = addRun(s.Done, o)
		case reserved:
			s.Reserved = addRun(s.Reserved, o)
			s.AllDone = false
		default:
			s.AllDone = false
		}
	}
	for _, o := range l.carried {
		s.Reserved = addRun(s.Reserved, o-l.first)
	}
	s.ReservedPos = addUnread(s.ReservedPos, l.prevPos, l.lastPos)
	s.EndedPos = addUnread(s.EndedPos, l.prevEnd, l.lastPos)
	// Nothing read: the earlier feed's state stands (the caller's).
	return s
}

// addPos adds pos to runs when in: to the last run when the element
// before was added too (prev), else as a run of its own.
func addPos(runs []Run, in, prev bool, pos int64) []Run {
	switch {
	case in && prev:
		runs[len(runs)-1][1] = pos
	case in:
		runs = append(runs, Run{pos, pos})
	}
	return runs
}

// addUnread adds to runs what lies past last of an earlier feed's runs
// by position.
func addUnread(runs, prev []Run, last int64) []Run {
	for _, r := range prev {
		if r[1] > last {
			runs = append(runs, Run{max(r[0], last+1), r[1]})
		}
	}
	return runs
}

// addRun adds o to runs, whose last run ends before o.
func addRun(runs []Run, o int64) []Run {
	if n := len(runs); n > 0 && runs[n-1][1] == o-1 {
		runs[n-1][1] = o
		return runs
	}
	return append(runs, Run{o, o})
}

// Committed tells the ledger that the store durably holds snapshot s: the
// reservations it held are made, and their elements may go out.
func (l *Ledger) Committed(s Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.Gen > l.durable {
		l.durable = s.Gen
		close(l.commit)
		l.commit = make(chan struct{})
	}
}
