package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// The engine's contracts: done is called once per element taken, with no
// lock of the Client held; an iterator's error is handed to done and the
// feed goes on; Feed and Send run at once; a paused feed still probes.

// hangGuard fails the test if done is not closed within a minute: a
// deadlock is the failure it catches, and a passing test never waits for
// it.
func hangGuard(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: deadlocked", what)
	}
}

// TestDoneMayCallTheClient: a done that calls Report and Counts returns,
// for operations acknowledged, failed and held back behind a failure (an
// operation held back used to be told under the Client's lock).
func TestDoneMayCallTheClient(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			return http.StatusBadRequest
		}
		return 0
	})
	cfg := testFeedConfig(srv.URL, nil)
	cfg.HoldBack = []string{"id:ns:d::held"}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	input := `{"put":"id:ns:d::held","fields":{}}
{"put":"id:ns:d::ok","fields":{}}
{"put":"id:ns:d::bad","fields":{}}
{"put":"id:ns:d::bad","fields":{}}
{"remove":"id:ns:d::held"}
`
	var calls atomic.Int64
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_ = c.Feed(t.Context(), Read(strings.NewReader(input)), func(Operation, Result, error) {
			_ = c.Report()
			_ = c.Counts()
			calls.Add(1)
		})
	}()
	hangGuard(t, finished, "Feed with a done that calls Report")
	if calls.Load() != 5 {
		t.Errorf("done called %d times, want 5", calls.Load())
	}
	if res := c.Report(); res.ok != 1 || res.heldBack != 3 || res.failed != 4 {
		t.Errorf("acknowledged %d, held back %d, failed %d; want 1, 3, 4", res.ok, res.heldBack, res.failed)
	}
}

// counted yields n puts and counts the elements taken: those whose yield
// returned true.
func counted(n int, taken *atomic.Int64) iter.Seq2[Operation, error] {
	return func(yield func(Operation, error) bool) {
		for i := range n {
			if !yield(Operation{Kind: Put, ID: fmt.Sprintf("id:ns:d::%d", i), Fields: json.RawMessage(`{}`)}, nil) {
				return
			}
			taken.Add(1)
		}
	}
}

// TestFeedTellsEveryElementTaken: when ctx ends during Feed, done is still
// called exactly once for every element taken from ops (its yield
// returned true), the one the reading goroutine held when the feed
// stopped included: that one's yield used to return false, and it was
// never told.
func TestFeedTellsEveryElementTaken(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprint(conc), func(t *testing.T) {
			cfg := testFeedConfig(srv.URL, nil)
			cfg.Concurrency = conc
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var taken, calls, notSent atomic.Int64
			err = c.Feed(ctx, counted(10000, &taken), func(_ Operation, _ Result, err error) {
				if calls.Add(1) == 50 {
					cancel()
				}
				if errors.Is(err, ErrNotSent) {
					notSent.Add(1)
				}
			})
			if err == nil {
				t.Fatal("Feed() = nil after an interrupt")
			}
			// With one at a time, the interrupt finds one waiting for a
			// place at least.
			if calls.Load() != taken.Load() || conc == 1 && notSent.Load() == 0 {
				t.Errorf("%d elements taken, done called %d times (%d not sent); want as many calls as elements", taken.Load(), calls.Load(), notSent.Load())
			}
		})
	}
}

// TestFeedGoesOnAfterAnIteratorError: an element that ops yields with an
// error of its own is handed to done, and the later elements are fed.
func TestFeedGoesOnAfterAnIteratorError(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	c, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("the row could not be read")
	ops := func(yield func(Operation, error) bool) {
		_ = yield(Operation{Kind: Put, ID: "id:ns:d::1", Fields: json.RawMessage(`{}`)}, nil) &&
			yield(Operation{Tag: "row 2"}, boom) &&
			yield(Operation{Kind: Put, ID: "id:ns:d::3", Fields: json.RawMessage(`{}`)}, nil)
	}
	var mu sync.Mutex
	got := map[any]error{}
	err = c.Feed(t.Context(), ops, func(o Operation, _ Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		key := any(o.ID)
		if o.Tag != nil {
			key = o.Tag
		}
		got[key] = err
	})
	if err == nil || !strings.Contains(err.Error(), "1 of 3 elements not acknowledged") {
		t.Errorf("Feed() = %v, want 1 of 3 not acknowledged", err)
	}
	if len(got) != 3 || got["id:ns:d::1"] != nil || got["id:ns:d::3"] != nil || !errors.Is(got["row 2"], boom) {
		t.Errorf("done heard %v, want the two puts acknowledged and row 2's error", got)
	}
	if n := len(srv.Applied()); n != 2 {
		t.Errorf("%d applied, want 2", n)
	}
}

// TestFeedAndSendAtOnce runs a Feed and Sends on one Client at once,
// under the race detector, with the Sends on the Feed's documents too:
// each document's operations are applied one at a time, and every one is
// acknowledged.
func TestFeedAndSendAtOnce(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	c, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		for i := range n {
			if _, err := c.Put(t.Context(), fmt.Sprintf("id:ns:d::%d", i%20), json.RawMessage(`{}`)); err != nil {
				t.Errorf("Put: %v", err)
			}
		}
	})
	<-started
	if err := c.Feed(t.Context(), Read(strings.NewReader(puts(n))), nil); err != nil {
		t.Errorf("Feed() = %v", err)
	}
	wg.Wait()
	if got := len(srv.Applied()); got != 2*n {
		t.Errorf("%d applied, want %d", got, 2*n)
	}
}

// TestFeedProbesWhenNothingIsLeft: a server fails every request with a
// 500 (not retried) until the breaker has sent its third probe, and
// answers from then on. Each operation that waits for a probe fails with
// it, so nothing is left waiting at the breaker; the paused feed still
// sends one operation at a time to wait for the next probe, one probe's
// success closes the breaker, and the feed goes on. It used to stay
// silent until MaxOutage after the first probe failed.
func TestFeedProbesWhenNothingIsLeft(t *testing.T) {
	t.Parallel()
	var c *Client
	srv := feedtest.New(t, func(*http.Request, int) int {
		if c.endpoints[0].breaker.Stats().Probes < 3 {
			return http.StatusInternalServerError
		}
		return 0
	})
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = 1
	cfg.MaxOutage = time.Minute
	var err error
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	const docs = 100
	res := feedReport(c, t.Context(), strings.NewReader(puts(docs)))
	if res.OutageExceeded() || res.ok == 0 || res.ok+res.failed != docs {
		t.Fatalf("outage exceeded %v, %d acknowledged, %d failed; want the feed to go on after the breaker opened", res.OutageExceeded(), res.ok, res.failed)
	}
	if s := c.endpoints[0].breaker.Stats(); s.State.String() != "closed" || s.Probes == 0 {
		t.Errorf("breaker %+v, want closed by a probe", s)
	}
}

// TestSendQuitsItsTurn: a Send waiting for its turn on a document returns
// when its context ends, and is never sent; the Send after it goes once the
// one before is done, in order.
func TestSendQuitsItsTurn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	first := make(chan struct{})
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		if n == 0 {
			close(first)
			<-release // the first Send's request waits
		}
		return 0
	})
	c, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	put := func(ctx context.Context, n int) error {
		_, err := c.Put(ctx, "id:ns:d::x", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)))
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := put(t.Context(), 1); err != nil {
			t.Errorf("first: %v", err)
		}
	})
	<-first
	ctx, cancel := context.WithCancel(t.Context())
	quit := make(chan error, 1)
	go func() { quit <- put(ctx, 2) }()
	for c.queues.joins.Load() < 2 { // the second is in the queue
		runtime.Gosched()
	}
	wg.Go(func() {
		if err := put(t.Context(), 3); err != nil {
			t.Errorf("third: %v", err)
		}
	})
	for c.queues.joins.Load() < 3 {
		runtime.Gosched()
	}
	cancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Errorf("the second Send = %v, want its context's error", err)
	}
	close(release)
	wg.Wait()
	var got []string
	for _, a := range srv.Applied() {
		got = append(got, a[strings.LastIndexByte(a, ':')+1:len(a)-2])
	}
	if len(got) != 2 || got[0] != "1" || got[1] != "3" {
		t.Errorf("applied %v, want the first then the third", got)
	}
}

// TestDoneOneAtATime: a Feed's done is called from one goroutine at a
// time (the hub's while the feed runs), for every element, with the
// operations on each document in input order: acknowledged, failed, held
// back behind a failure, bad input, and, after an interrupt, not sent.
// Before the hub, done ran on each operation's goroutine, many at once.
func TestDoneOneAtATime(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		if strings.HasSuffix(r.URL.Path, "7") {
			return http.StatusBadRequest // every operation on a document whose id ends in 7 fails
		}
		return 0
	})
	var in strings.Builder
	const docs, perDoc = 50, 4
	for k := range perDoc {
		for i := range docs {
			fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"k":%d}}`+"\n", i, k)
		}
		in.WriteString("{\"put\": 1}\n") // an element that is no operation
	}
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Log = io.Discard
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		inside, overlaps atomic.Int64
		mu               sync.Mutex
		seen             = map[string][]int{} // the line of each operation told, by document
		calls            int
	)
	err = c.Feed(t.Context(), Read(strings.NewReader(in.String())), func(o Operation, _ Result, _ error) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		for range 20 { // room for another caller to come in, if any could
			runtime.Gosched()
		}
		mu.Lock()
		calls++
		if o.ID != "" {
			seen[o.ID] = append(seen[o.ID], o.Line)
		}
		mu.Unlock()
		inside.Add(-1)
	})
	if err == nil {
		t.Fatal("Feed returned nil, want the failures")
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("done was entered %d times while another call ran", n)
	}
	if want := docs*perDoc + perDoc; calls != want {
		t.Errorf("done called %d times, want %d", calls, want)
	}
	for id, lines := range seen {
		if !slices.IsSorted(lines) || len(lines) != perDoc {
			t.Errorf("%s told at lines %v, want %d in input order", id, lines, perDoc)
		}
	}
	if res := c.Report(); res.heldBack != 5*(perDoc-1) || res.badInput != perDoc {
		t.Errorf("held back %d, bad input %d; want %d and %d", res.heldBack, res.badInput, 5*(perDoc-1), perDoc)
	}
}
