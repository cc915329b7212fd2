package feed

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestSameOperationsTwoClients: the same Operation values, read once, fed
// by two Clients to two servers at once (one input copied to two
// clusters), one of which refuses a document: no race, no panic, and each
// destination's outcomes are its own. A Feed used to write its state into
// the parse that the values share: 3 races a run, and the refusal made the
// other Feed panic with a negative WaitGroup counter.
func TestSameOperationsTwoClients(t *testing.T) {
	t.Parallel()
	const ids, puts = 50, 2000
	var in strings.Builder
	for i := range puts {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i%ids, i)
	}
	var ops []Operation
	for o, err := range Read(strings.NewReader(in.String())) {
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
	}
	refused := "/docid/7"
	good := feedtest.New(t, nil)
	bad := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, refused) {
			return http.StatusBadRequest
		}
		return 0
	})
	type outcome struct {
		ok, failed, heldBack int
	}
	results := make([]outcome, 2)
	var wg sync.WaitGroup
	for i, srv := range []*feedtest.Server{good, bad} {
		c, err := New(Config{URL: srv.URL, Concurrency: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			var mu sync.Mutex
			all := func(yield func(Operation, error) bool) {
				for _, o := range ops {
					if !yield(o, nil) {
						return
					}
				}
			}
			_ = c.Feed(t.Context(), all, func(o Operation, _ Result, err error) {
				mu.Lock()
				defer mu.Unlock()
				var fe *Error
				switch {
				case err == nil:
					results[i].ok++
				case errors.Is(err, ErrHeldBack):
					results[i].heldBack++
				case errors.As(err, &fe):
					results[i].failed++
				}
			})
		})
	}
	wg.Wait()
	if results[0] != (outcome{ok: puts}) {
		t.Errorf("the good server's feed: %+v, want all %d acknowledged", results[0], puts)
	}
	// Document 7's first put is refused, and its 39 later ones held back.
	if want := (outcome{ok: puts - puts/ids, failed: 1, heldBack: puts/ids - 1}); results[1] != want {
		t.Errorf("the refusing server's feed: %+v, want %+v", results[1], want)
	}
	if n := len(good.Applied()); n != puts {
		t.Errorf("the good server applied %d puts, want %d", n, puts)
	}
}
