package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestFeedDispatchBytesBounded: operations of 1 MiB with a 4 MiB bound
// are dispatched at most 4 at a time, whatever the limiter allows; an
// operation larger than the bound goes alone.
func TestFeedDispatchBytesBounded(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, most := 0, 0
	over := make(chan struct{}) // closed when a fifth request is held
	var once sync.Once
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == 5 {
			once.Do(func() { close(over) })
		}
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		select { // hold it, so that the feed dispatches all it may
		case <-over:
		case <-time.After(20 * time.Millisecond):
		}
		return 0
	})
	var in strings.Builder
	big := strings.Repeat("x", 1<<20)
	for i := range 40 {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"s":"%s"}}`+"\n", i, big[:len(big)/2])
	}
	fmt.Fprintf(&in, `{"put":"id:ns:d::huge","fields":{"s":"%s%s%s"}}`+"\n", big, big, big)
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = 64
	cfg.MaxDispatchBytes = 4 << 20
	res, _, stderr := runTestFeed(t, context.Background(), cfg, in.String())
	if res.ok != 41 {
		t.Fatalf("ok = %d, want 41; stderr:\n%s", res.ok, stderr)
	}
	// Each operation holds its text and its body: about 1 MiB.
	if most > 4 {
		t.Errorf("%d operations in flight at once, want at most 4", most)
	}
}

// TestWindowLimit: with a limit, take admits operations while fewer than
// limit() are dispatched, reads the limit again at each take, and a take
// that waits goes on at the next give that leaves room.
func TestWindowLimit(t *testing.T) {
	t.Parallel()
	limit := 2
	w := &dispatcher{}
	w.start(window{n: 10, max: 1 << 20, limit: func() int { return limit }}, nil)
	op := &operation{text: []byte("x")}
	ctx := context.Background()
	for range 2 {
		if err := w.take(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithCancel(ctx)
	w.win.onWait = func(ops int) { cancel() }
	if err := w.take(short, op); err == nil {
		t.Fatal("a third take went at a limit of 2")
	}
	limit = 3 // read at the next take
	if err := w.take(ctx, op); err != nil {
		t.Fatal(err)
	}
	waited := make(chan int, 1)
	w.win.onWait = func(ops int) { waited <- ops }
	done := make(chan error)
	go func() { done <- w.take(ctx, op) }()
	if ops := <-waited; ops != 3 {
		t.Fatalf("take waited at %d dispatched, want 3", ops)
	}
	w.give(op)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.win.ops != 3 {
		t.Errorf("ops = %d after the give and the take, want 3", w.win.ops)
	}
}

// TestFeedDispatchFollowsLimiter: with the limiter and one endpoint, a
// feed's dispatch takes each operation's first permit before it starts it
// (see run.dispatch): while the server answers nothing, initialInFlight
// operations go (the start's limit) and one more waits at the limiter, on
// the dispatching goroutine, not on a sender of its own;
// Config.MaxInFlight (1024) and the window (the limit and
// queuedPerLimiter more) do not bind, however much input is waiting. The
// feed then completes.
func TestFeedDispatchFollowsLimiter(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var arrived atomic.Int64
	srv := feedtest.New(t, func(*http.Request, int) int { arrived.Add(1); <-hold; return 0 })
	var in strings.Builder
	const docs = 2000
	for i := range docs {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i, i)
	}
	f, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	var holding atomic.Bool // the server answers nothing yet
	holding.Store(true)
	f.testWindowWait = func(ops int) {
		if holding.Load() {
			t.Errorf("the window filled at %d operations dispatched, with nothing answered", ops)
		}
	}
	done := make(chan Report)
	go func() { done <- feedReport(f, context.Background(), strings.NewReader(in.String())) }()
	l := f.soleLimiter
	// The dispatching goroutine comes to wait for the next one's permit;
	// it must, since nothing comes back.
	for l.Stats().Waiting == 0 {
		runtime.Gosched()
	}
	f.queues.mu.Lock()
	dispatched := f.queues.win.ops
	f.queues.mu.Unlock()
	if s := l.Stats(); s.InFlight != initialInFlight || s.Waiting != 1 || dispatched != initialInFlight+1 {
		t.Errorf("waiting for a permit: %d in flight, %d waiting, %d dispatched; want %d, 1 and %d", s.InFlight, s.Waiting, dispatched, initialInFlight, initialInFlight+1)
	}
	holding.Store(false) // the window may fill once answers come: the hub gives places back after them
	close(hold)
	res := <-done
	if n := arrived.Load(); !res.Complete() || res.ok != docs || n != docs {
		t.Errorf("feed incomplete, %d ok, %d requests:\n%s", res.ok, n, res.Summary())
	}
}

// TestFeedKeepsFewIdleSenders: after a burst of operations in flight at
// once, the senders it needed do not all wait for work until the feed
// ends: at most maxIdleSenders do, the rest return. Hundreds of idle
// goroutines would hold their stacks for hours, and pull the runtime's
// size of a new goroutine's stack down to where every HTTP/2 request's
// goroutine has to grow its own.
// Not parallel: it counts every feed's senders.
func TestFeedKeepsFewIdleSenders(t *testing.T) {
	const burst = 200
	var arrived atomic.Int64
	all := make(chan struct{})
	srv := feedtest.New(t, func(*http.Request, int) int {
		if arrived.Add(1) == burst {
			close(all)
		}
		<-all // answer none before the whole burst is in flight
		return 0
	})
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = burst
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	put := func(i int) Operation {
		return Operation{Kind: Put, ID: fmt.Sprintf("id:ns:d::%d", i), Fields: json.RawMessage(`{}`)}
	}
	var acked atomic.Int64
	burstDone := make(chan struct{})
	idle := -1
	ops := func(yield func(Operation, error) bool) {
		for i := range burst {
			if !yield(put(i), nil) {
				return
			}
		}
		<-burstDone
		idle = settledSenders(t)
		yield(put(burst), nil)
	}
	err = f.Feed(context.Background(), ops, func(_ Operation, _ Result, err error) {
		if err == nil && acked.Add(1) == burst {
			close(burstDone)
		}
	})
	if err != nil || acked.Load() != burst+1 {
		t.Fatalf("feed: %v, %d acknowledged; want nil and %d", err, acked.Load(), burst+1)
	}
	if idle > int(maxIdleSenders) {
		t.Errorf("after the burst of %d, %d senders wait for work; want at most %d", burst, idle, maxIdleSenders)
	}
}

// settledSenders returns the count of the feed's senders once none of
// them is running: each has returned, or waits for work.
func settledSenders(t *testing.T) int {
	buf := make([]byte, 1<<20)
	for range 100000 {
		for len(buf) == runtime.Stack(buf, true) {
			buf = make([]byte, 2*len(buf))
		}
		n, busy := 0, false
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, "feed.(*run).sender(") {
				continue
			}
			n++
			busy = busy || !strings.Contains(g, "[select")
		}
		if !busy {
			return n
		}
		runtime.Gosched()
	}
	t.Fatal("the senders did not settle")
	return 0
}

// TestRatePaceBinds: the dispatch takes the permits of a limiter whose
// rate limit is off, or on but well above the attempts released (the
// in-flight limit binds), and leaves them to the senders while the rate
// binds, or before anything was measured; it measures over paceWindow at
// least, and keeps its answer in between.
func TestRatePaceBinds(t *testing.T) {
	t.Parallel()
	var p ratePace
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i, step := range []struct {
		after    time.Duration // since the step before
		rate     float64
		released int64 // in all
		binds    bool
	}{
		{0, 0, 0, false},                    // off
		{time.Second, 2000, 1000, false},    // on, at twice the 1000/s released
		{time.Second, 1000, 1900, true},     // 900/s released: 1.11 times
		{paceWindow / 2, 1000, 1900, true},  // nothing released, but too soon to tell
		{paceWindow / 2, 2000, 2050, false}, // 1500/s over paceWindow: 1.33 times
		{paceWindow, 1000, 2050, false},     // nothing released over paceWindow
		{time.Second, 0, 4000, false},       // off again
		{paceWindow / 10, 10, 4000, false},  // on, too soon to tell: as before
		{time.Second, 10, 4010, true},       // 10 released in 1.01 s
	} {
		start = start.Add(step.after)
		st := retries.LimiterStats{Rate: step.rate, Successes: step.released * 9 / 10, Throttles: step.released / 10}
		if p.look(st, start); p.binds != step.binds {
			t.Errorf("step %d (rate %g, %d released): binds = %v, want %v", i, step.rate, step.released, p.binds, step.binds)
		}
	}
	var fresh ratePace
	if fresh.look(retries.LimiterStats{Rate: 10}, start); !fresh.binds {
		t.Error("a first look at a rate limit that is on: binds = false, want true")
	}
}
