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

// TestFeedAgainWhatDoneGot: the Operations a Feed's done was handed, fed
// again by another Client, are sent as any Operation is: what one Feed did
// with them (a document held back, a place in its feed) does not come with
// them. done used to get an Operation that remembered the Feed's own
// record, and feeding it again copied that record: the puts held back in
// the first Feed were all held back again, none sent.
func TestFeedAgainWhatDoneGot(t *testing.T) {
	t.Parallel()
	const puts = 40
	var in strings.Builder
	for i := range puts {
		fmt.Fprintf(&in, `{"put":"id:ns:d::%d","fields":{"n":%d}}`+"\n", i%4, i)
	}
	// Document 1's first put is refused once the other documents' puts
	// are all in: by then its later puts wait in its queue behind it, and
	// are held back as their turn comes.
	others, in3 := make(chan struct{}), 0
	var mu sync.Mutex
	bad := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/docid/1") {
			<-others
			return http.StatusBadRequest
		}
		mu.Lock()
		if in3++; in3 == puts-puts/4 {
			close(others)
		}
		mu.Unlock()
		return 0
	})
	c, err := New(Config{URL: bad.URL, Concurrency: puts})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var again []Operation // the puts held back
	c.Feed(t.Context(), Read(strings.NewReader(in.String())), func(o Operation, _ Result, err error) {
		if errors.Is(err, ErrHeldBack) {
			again = append(again, o)
		}
	})
	if len(again) != puts/4-1 {
		t.Fatalf("the first feed held back %d operations, want %d", len(again), puts/4-1)
	}
	good := feedtest.New(t, nil)
	c2, err := New(Config{URL: good.URL, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	seq := func(yield func(Operation, error) bool) {
		for _, o := range again {
			if !yield(o, nil) {
				return
			}
		}
	}
	var failed []string
	c2.Feed(t.Context(), seq, func(o Operation, _ Result, err error) {
		if err != nil {
			failed = append(failed, fmt.Sprintf("line %d: %v", o.Line, err))
		}
	})
	if len(failed) > 0 || len(good.Applied()) != len(again) {
		t.Errorf("fed again: %d applied, failed %q; want all %d applied", len(good.Applied()), failed, len(again))
	}
}
