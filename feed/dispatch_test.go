package feed

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
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

// TestFeedDispatchFollowsLimiter: with the limiter, a feed dispatches at
// most queuedPerLimiter operations beyond the limiter's limit (4 at the
// start), not Config.MaxInFlight (1024), however much input is waiting;
// and the feed then completes.
func TestFeedDispatchFollowsLimiter(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	srv := feedtest.New(t, func(*http.Request, int) int { <-hold; return 0 })
	var in strings.Builder
	const docs = 2000
	for i := range docs {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i, i)
	}
	f, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	waited := make(chan int, 1)
	f.testWindowWait = func(ops int) { once.Do(func() { waited <- ops; close(hold) }) }
	res := feedReport(f, context.Background(), strings.NewReader(in.String()))
	if ops, want := <-waited, 4+queuedPerLimiter; ops != want {
		t.Errorf("the first wait came at %d operations dispatched, want %d (the start's limit of 4, plus %d)", ops, want, queuedPerLimiter)
	}
	if !res.Complete() || res.ok != docs {
		t.Errorf("feed incomplete, %d ok:\n%s", res.ok, res.Summary())
	}
}
