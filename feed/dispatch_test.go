package feed

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// (see run.dispatch): while the server answers nothing, 4 operations go
// (the start's limit) and a fifth waits at the limiter, on the dispatching
// goroutine, not on a sender of its own; Config.MaxInFlight (1024) and the
// window (the limit and queuedPerLimiter more) do not bind, however much
// input is waiting. The feed then completes.
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
	// The dispatching goroutine comes to wait for the fifth's permit; it
	// must, since nothing comes back.
	for l.Stats().Waiting == 0 {
		runtime.Gosched()
	}
	f.queues.mu.Lock()
	dispatched := f.queues.win.ops
	f.queues.mu.Unlock()
	if s := l.Stats(); s.InFlight != 4 || s.Waiting != 1 || dispatched != 5 {
		t.Errorf("waiting for a permit: %d in flight, %d waiting, %d dispatched; want 4, 1 and 5", s.InFlight, s.Waiting, dispatched)
	}
	holding.Store(false) // the window may fill once answers come: the hub gives places back after them
	close(hold)
	res := <-done
	if n := arrived.Load(); !res.Complete() || res.ok != docs || n != docs {
		t.Errorf("feed incomplete, %d ok, %d requests:\n%s", res.ok, n, res.Summary())
	}
}
