package visit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// TestShares: three clients, each with its share of 12 slices, visit the
// corpus once between them, each document by one share; each share's
// progress says it is complete, and is refused by a client of another
// share.
func TestShares(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 3000, 64, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	progress := make([]visit.Progress, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			c, err := visit.New(visit.Config{URL: srv.URL, Cluster: "music", Slices: 12, Share: visit.Share{Index: i, Of: 3}})
			if err != nil {
				t.Error(err)
				return
			}
			p, err := c.Visit(t.Context(), visit.Progress{}, func(pg visit.Page) error {
				if pg.Slice%3 != i {
					t.Errorf("share %d/3 visited slice %d", i, pg.Slice)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, d := range pg.Documents {
					seen[d.ID]++
				}
				return nil
			})
			if err != nil || !p.Complete() {
				t.Errorf("share %d/3: %v, complete %v", i, err, p.Complete())
			}
			progress[i] = p
		})
	}
	wg.Wait()
	if len(seen) != 3000 {
		t.Errorf("%d documents visited, want 3000", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s visited %d times", id, n)
		}
	}
	// A share's progress, half done, is refused by another share's client.
	half := progress[0]
	half.Done = append([]bool(nil), half.Done...)
	half.Done[0] = false
	c, err := visit.New(visit.Config{URL: srv.URL, Cluster: "music", Slices: 12, Share: visit.Share{Index: 1, Of: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Visit(context.Background(), half, func(visit.Page) error { return nil }); err == nil || !strings.Contains(err.Error(), "not of share 1/3") {
		t.Errorf("share 1/3 from share 0/3's progress: %v", err)
	}
}

// TestShareRefused: a share that cannot split the visit is refused by New;
// ParseShare reads I/W and refuses the rest.
func TestShareRefused(t *testing.T) {
	t.Parallel()
	for _, sh := range []visit.Share{{Index: 3, Of: 3}, {Index: -1, Of: 3}, {Index: 0, Of: -2}, {Index: 1, Of: 0}, {Index: 0, Of: 5}} {
		if _, err := visit.New(visit.Config{URL: "http://localhost:8080", Cluster: "music", Slices: 4, Share: sh}); err == nil {
			t.Errorf("New with share %+v of 4 slices: no error", sh)
		}
	}
	for in, want := range map[string]string{"0/3": "0/3", "2/3": "2/3", "0/1": "0/1", "3/3": "", "1/0": "", "x": "", "1/": "", "-1/2": "", "1/2/3": ""} {
		s, err := visit.ParseShare(in)
		if got := s.String(); (err == nil) != (want != "") || err == nil && got != want {
			t.Errorf("ParseShare(%q) = %v, %v; want %q", in, got, err, want)
		}
	}
}
