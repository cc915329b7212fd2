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
