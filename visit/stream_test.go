package visit

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/seed32e55400/retries/visit/visittest"
)

// cutting returns a fault that cuts a share of the requests after a
// random number of lines (bytes of a page), up to most, drawn from seed.
func cutting(share float64, most int, seed uint64) func(*http.Request, int) int {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(*http.Request, int) int {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < share {
			return visittest.CutAfter(rng.IntN(most))
		}
		return 0
	}
}

// TestVisitStreamCut: streams cut after any line, a token's line or a
// document's, are taken up from the last token read, and the documents
// the server sends again are dropped: each document once.
func TestVisitStreamCut(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		srv := visittest.New(t, 3000, 211, cutting(0.5, 60, seed))
		c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 3, WantedDocumentCount: 200})
		if err != nil {
			t.Fatal(err)
		}
		got, p, err := collect(t, c, Progress{}, 0)
		if err != nil || !p.Complete() || p.Seen != nil {
			t.Fatalf("seed %d: Visit = %+v, %v; want complete, nothing seen", seed, p, err)
		}
		checkOnce(t, got, 3000)
		if again := srv.Sent() - 3000; again == 0 {
			t.Errorf("seed %d: no document sent twice: the cuts tested nothing", seed)
		}
	}
}

// TestVisitStreamResumes: a visit of cut streams stopped by its caller
// after a random number of pieces, again and again, each resumed from the
// progress the last one returned (its Seen included), hands out each
// document once in all. (A Seen that forgot a document dropped on the way,
// the first of a bucket read again before a token that does not cover it,
// repeated one in about one run in six.)
func TestVisitStreamResumes(t *testing.T) {
	t.Parallel()
	for seed := range uint64(30) {
		srv := visittest.New(t, 4000, 157, cutting(0.3, 80, seed))
		c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 4, WantedDocumentCount: 150})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, seed))
		all := map[int]int{}
		p, seen := Progress{}, false
		for round := 0; !p.Complete(); round++ {
			if round == 300 {
				t.Fatalf("seed %d: not complete after 300 visits", seed)
			}
			got, next, err := collect(t, c, p, 1+rng.IntN(6))
			if err != nil && !errors.Is(err, errStop) {
				t.Fatalf("seed %d, round %d: %v", seed, round, err)
			}
			for d, k := range got {
				all[d] += k
			}
			p, seen = next, seen || next.Seen != nil
		}
		checkOnce(t, all, 4000)
		if !seen {
			t.Errorf("seed %d: no progress held a Seen: the resumes tested nothing", seed)
		}
	}
}

// TestVisitPagesFromAServerWithoutStreams: a server that answers a
// stream with JSON pages is read page by page, through faults.
func TestVisitPagesFromAServerWithoutStreams(t *testing.T) {
	t.Parallel()
	srv := visittest.NewUnstartedServer(3000, 101, cutting(0.3, 2000, 5))
	srv.Streams = false
	srv.Start()
	t.Cleanup(srv.Close)
	visitAllOnce(t, srv, 3000)
}

// TestVisitPages: Config.Pages asks for pages, never a stream.
func TestVisitPages(t *testing.T) {
	t.Parallel()
	var streams int
	var mu sync.Mutex
	srv := visittest.New(t, 1000, 31, func(r *http.Request, _ int) int {
		if r.URL.Query().Get("stream") != "" {
			mu.Lock()
			streams++
			mu.Unlock()
		}
		return 0
	})
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 2, Pages: true})
	if err != nil {
		t.Fatal(err)
	}
	got, p, err := collect(t, c, Progress{}, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("Visit = %+v, %v", p, err)
	}
	checkOnce(t, got, 1000)
	if streams > 0 {
		t.Errorf("%d requests asked for a stream", streams)
	}
}

// TestVisitSeveralEndpoints: slice i goes to endpoint i mod 2, and the two
// serve the corpus once between them.
func TestVisitSeveralEndpoints(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	slicesOf := map[int]map[string]bool{}
	note := func(ep int) func(*http.Request, int) int {
		return func(r *http.Request, _ int) int {
			mu.Lock()
			defer mu.Unlock()
			if slicesOf[ep] == nil {
				slicesOf[ep] = map[string]bool{}
			}
			slicesOf[ep][r.URL.Query().Get("sliceId")] = true
			return 0
		}
	}
	a, b := visittest.New(t, 2000, 64, note(0)), visittest.New(t, 2000, 64, note(1))
	c, err := New(Config{URLs: []string{a.URL, b.URL}, Cluster: "music", Slices: 4, WantedDocumentCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	got, p, err := collect(t, c, Progress{}, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("Visit = %+v, %v", p, err)
	}
	checkOnce(t, got, 2000)
	if want := map[string]bool{"0": true, "2": true}; !equalSets(slicesOf[0], want) {
		t.Errorf("the first endpoint served slices %v, want 0 and 2", slicesOf[0])
	}
	if want := map[string]bool{"1": true, "3": true}; !equalSets(slicesOf[1], want) {
		t.Errorf("the second endpoint served slices %v, want 1 and 3", slicesOf[1])
	}
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
