package ledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
)

// TestWatermarkAndRuns: the watermark is the first element not done, or
// the last one read when all are; Done and Reserved are runs from it.
func TestWatermarkAndRuns(t *testing.T) {
	l := New(nil)
	if s := l.Snapshot(); s.Ord != -1 || !s.AllDone {
		t.Fatalf("empty ledger: %+v, want Ord -1 and all done", s)
	}
	for i := range 8 {
		if ord := l.Add(int64(100+10*i), i+1); ord != int64(i) {
			t.Fatalf("Add %d = %d", i, ord)
		}
	}
	for _, o := range []int64{0, 1, 3, 4, 6} {
		l.Done(o)
	}
	s := l.Snapshot()
	if s.Ord != 2 || s.Pos != 120 || s.Aux != 3 || s.AllDone {
		t.Errorf("watermark %d at %d line %d (all done %v), want 2 at 120 line 3", s.Ord, s.Pos, s.Aux, s.AllDone)
	}
	if want := []Run{{1, 2}, {4, 4}}; !slices.Equal(s.Done, want) {
		t.Errorf("Done = %v, want %v (from the watermark)", s.Done, want)
	}
	if ord, ok := l.Find(150); !ok || ord != 5 {
		t.Errorf("Find(150) = %d, %v; want 5", ord, ok)
	}
	if _, ok := l.Find(110); ok {
		t.Error("Find found an element below the watermark")
	}
	for _, o := range []int64{2, 5, 7} {
		l.Done(o)
	}
	if s := l.Snapshot(); s.Ord != 7 || !s.AllDone || !slices.Equal(s.Done, []Run{{0, 0}}) {
		t.Errorf("all done: %+v, want the last element as the watermark, done", s)
	}
}

// TestReserveWaitsForCommit: a reservation returns once a snapshot that
// holds it is committed, not before; several asked together go in one
// snapshot; a done or unreserved element leaves the reserved runs.
func TestReserveWaitsForCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(nil)
		for i := range 4 {
			l.Add(int64(i), 0)
		}
		done := make(chan int64, 4)
		for _, o := range []int64{1, 2} {
			go func() {
				if err := l.Reserve(t.Context(), o); err != nil {
					t.Error(err)
				}
				done <- o
			}()
		}
		synctest.Wait()
		select {
		case <-l.Asked():
		default:
			t.Fatal("no snapshot asked for")
		}
		s := l.Snapshot()
		if want := []Run{{1, 2}}; !slices.Equal(s.Reserved, want) {
			t.Errorf("Reserved = %v, want %v", s.Reserved, want)
		}
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("a reservation returned before its snapshot was committed")
		}
		l.Committed(s)
		synctest.Wait()
		if len(done) != 2 {
			t.Fatalf("%d reservations returned after the commit, want 2", len(done))
		}
		if err := l.Reserve(t.Context(), 1); err != nil { // durable already
			t.Error(err)
		}
		l.Done(1)
		l.Unreserve(2)
		if s := l.Snapshot(); len(s.Reserved) != 0 {
			t.Errorf("Reserved = %v after Done and Unreserve, want none", s.Reserved)
		}
	})
}

// TestReserveEndsWithContext: a reservation whose context ends returns
// its error.
func TestReserveEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(nil)
		l.Add(0, 0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- l.Reserve(ctx, 0) }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Reserve = %v, want context.Canceled", err)
		}
	})
}

// TestCarriedReservations: an earlier feed's reservations are reported by
// SentBefore once read, refused by Reserve, stay in the snapshot until done
// (read or not), and are durable from the start.
func TestCarriedReservations(t *testing.T) {
	l := New([]Run{{1, 1}, {5, 6}})
	for i := range 3 {
		l.Add(int64(i), 0)
	}
	if !l.SentBefore(1) || l.SentBefore(2) || l.SentBefore(6) {
		t.Error("SentBefore does not report the earlier feed's reservations among the elements read")
	}
	if want := []Run{{1, 1}, {5, 6}}; !slices.Equal(l.Snapshot().Reserved, want) {
		t.Errorf("Reserved = %v, want %v", l.Snapshot().Reserved, want)
	}
	if err := l.Reserve(context.Background(), 1); !errors.Is(err, ErrSentBefore) {
		t.Errorf("Reserve of a carried reservation = %v, want ErrSentBefore at once: it is not sent again", err)
	}
	l.Done(0)
	l.Done(1)
	s := l.Snapshot() // watermark 2
	if want := []Run{{3, 4}}; s.Ord != 2 || !slices.Equal(s.Reserved, want) {
		t.Errorf("watermark %d, Reserved %v; want 2 and %v (5 and 6 from it)", s.Ord, s.Reserved, want)
	}
}

// TestCarriedByPosition: an earlier feed's reservations given by position
// (Kafka offsets, with gaps) mark the elements read in them, and what is
// not read yet stays in ReservedPos; this feed's reservations come out as
// runs of positions.
func TestCarriedByPosition(t *testing.T) {
	l := NewPos([]Run{{12, 15}, {40, 49}}, nil)
	for _, pos := range []int64{10, 11, 12, 14, 20, 21, 42} { // 13 and 15 are gone (compacted)
		l.Add(pos, 0)
	}
	ord12, _ := l.Find(12)
	ord42, _ := l.Find(42)
	ord20, _ := l.Find(20)
	if !l.SentBefore(ord12) || !l.SentBefore(ord42) || l.SentBefore(ord20) {
		t.Error("SentBefore does not follow the runs by position")
	}
	ord21, _ := l.Find(21)
	go func() { _ = l.Reserve(context.Background(), ord21) }()
	<-l.Asked() // the reservation is asked for
	s := l.Snapshot()
	// 21 and 42 are read one after the other: one run.
	if want := []Run{{12, 14}, {21, 42}, {43, 49}}; !slices.Equal(s.ReservedPos, want) {
		t.Errorf("ReservedPos = %v, want %v", s.ReservedPos, want)
	}
	if want := []Run{{2, 3}, {5, 6}}; !slices.Equal(s.Reserved, want) {
		t.Errorf("Reserved = %v, want %v (2, 3 and 6 carried, 5 asked)", s.Reserved, want)
	}
	l.Committed(s)
}

// TestEndedByPosition: the elements reserved and done past the watermark
// come out in EndedPos, by position, until the watermark passes them; an
// earlier feed's ended runs mark the elements read in them as done and
// EndedBefore (neither sent nor reported again), and what is not read yet
// stays in EndedPos. The earlier feed's reservations still come out in
// ReservedPos, not in EndedPos, until they are done.
func TestEndedByPosition(t *testing.T) {
	l := NewPos([]Run{{11, 11}}, []Run{{13, 14}, {30, 31}})
	ord := map[int64]int64{}
	for _, pos := range []int64{10, 11, 12, 13, 14, 15, 16} {
		ord[pos] = l.Add(pos, 0)
	}
	if !l.EndedBefore(ord[13]) || !l.EndedBefore(ord[14]) || l.EndedBefore(ord[12]) || l.EndedBefore(ord[11]) {
		t.Error("EndedBefore does not follow the ended runs by position")
	}
	if !l.SentBefore(ord[11]) || l.SentBefore(ord[13]) {
		t.Error("SentBefore: an ended element is not a reservation to report")
	}
	// 15 and 16 are reserved and made durable; 16 is then done, as is 11
	// (reported by this feed); 10 is not done: the watermark stays at 10.
	for _, pos := range []int64{15, 16} {
		go func() { _ = l.Reserve(context.Background(), ord[pos]) }()
		<-l.Asked()
		l.Committed(l.Snapshot())
	}
	l.Done(ord[16])
	l.Done(ord[11])
	s := l.Snapshot()
	if want := []Run{{11, 11}, {13, 14}, {16, 16}, {30, 31}}; !slices.Equal(s.EndedPos, want) {
		t.Errorf("EndedPos = %v, want %v", s.EndedPos, want)
	}
	if want := []Run{{15, 15}}; !slices.Equal(s.ReservedPos, want) {
		t.Errorf("ReservedPos = %v, want %v", s.ReservedPos, want)
	}
	// Once the watermark passes them, they are not listed.
	l.Done(ord[10])
	l.Done(ord[12])
	l.Done(ord[15])
	s = l.Snapshot()
	if want := []Run{{30, 31}}; !slices.Equal(s.EndedPos, want) || s.ReservedPos != nil || s.Pos != 16 {
		t.Errorf("past the watermark %d: EndedPos = %v, ReservedPos = %v; want %v and none", s.Pos, s.EndedPos, s.ReservedPos, want)
	}
}
