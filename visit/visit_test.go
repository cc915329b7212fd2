package visit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries/visit/visittest"
)

// collect visits srv with cfg from from, and returns the documents of the
// pages it accepted by number, and the progress.
func collect(t *testing.T, c *Client, from Progress, stopAfter int) (map[int]int, Progress, error) {
	t.Helper()
	got := map[int]int{}
	pages := 0
	p, err := c.Visit(t.Context(), from, func(pg Page) error {
		if stopAfter > 0 && pages == stopAfter {
			return errStop
		}
		pages++
		for _, d := range pg.Documents {
			var f struct{ N int }
			if err := json.Unmarshal(d.Fields, &f); err != nil {
				t.Errorf("fields %s: %v", d.Fields, err)
			}
			if want := "id:music:music::"; !strings.HasPrefix(d.ID, want) {
				t.Errorf("id %q", d.ID)
			}
			got[f.N]++
		}
		return nil
	})
	return got, p, err
}

var errStop = errors.New("stop here")

// checkOnce fails t unless got holds each of n documents exactly once.
func checkOnce(t *testing.T, got map[int]int, n int) {
	t.Helper()
	lost, twice := 0, 0
	for d := range n {
		switch got[d] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	if lost > 0 || twice > 0 || len(got) != n {
		t.Errorf("%d documents lost, %d twice, %d in all; want each of %d once", lost, twice, len(got), n)
	}
}

// TestVisitEveryDocumentOnce: four slices visited at once, in pages of
// whole buckets, hand out each document once, and end complete.
func TestVisitEveryDocumentOnce(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 5000, 97, nil)
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 4, WantedDocumentCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	got, p, err := collect(t, c, Progress{}, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("Visit = %+v, %v; want complete", p, err)
	}
	checkOnce(t, got, 5000)
}

// TestVisitResumes: a visit stopped by its caller after 7 pages returns
// the progress of the pages it accepted; a visit from there hands out the
// rest, so that the two hold every document once.
func TestVisitResumes(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 3000, 64, nil)
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 3, WantedDocumentCount: 50})
	if err != nil {
		t.Fatal(err)
	}
	first, p, err := collect(t, c, Progress{}, 7)
	if !errors.Is(err, errStop) || p.Complete() {
		t.Fatalf("the first visit: %+v, %v; want it stopped", p, err)
	}
	second, p, err := collect(t, c, p, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("the second visit: %+v, %v", p, err)
	}
	for d, n := range second {
		first[d] += n
	}
	checkOnce(t, first, 3000)
	other, _ := New(Config{URL: srv.URL, Cluster: "music", Slices: 2})
	if _, err := other.Visit(t.Context(), p, func(Page) error { return nil }); err == nil {
		t.Error("a progress of 3 slices was taken by a visit of 2")
	}
}

// visitAllOnce visits srv's n documents in four slices, pages of 100,
// and fails t unless the visit ends complete with each document once.
func visitAllOnce(t *testing.T, srv *visittest.Server, n int) {
	t.Helper()
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 4, WantedDocumentCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	got, p, err := collect(t, c, Progress{}, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("Visit = %+v, %v", p, err)
	}
	checkOnce(t, got, n)
}

// TestVisitThroughFaults: 503s, 429s and reset connections on a tenth of
// the requests each lose no document and repeat none.
func TestVisitThroughFaults(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 4000, 128, func(_ *http.Request, n int) int {
		switch n % 10 {
		case 3:
			return http.StatusServiceUnavailable
		case 6:
			return http.StatusTooManyRequests
		case 8:
			return visittest.Reset
		}
		return 0
	})
	visitAllOnce(t, srv, 4000)
}

// TestVisitOutage: a server that answers 503 to its first 8 requests is
// waited out: the retries, the breaker and the page asked for again.
func TestVisitOutage(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 2000, 32, func(_ *http.Request, n int) int {
		if n < 8 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	visitAllOnce(t, srv, 2000)
}

// TestVisitUnknownCluster: a cluster the server does not have is refused
// with the server's message, at once.
func TestVisitUnknownCluster(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := visittest.New(t, 10, 4, func(*http.Request, int) int { requests.Add(1); return 0 })
	c, err := New(Config{URL: srv.URL, Cluster: "nope", Slices: 4})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Visit(t.Context(), Progress{}, func(Page) error { return nil })
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !strings.Contains(se.Message, "no content cluster 'nope', only 'music'") {
		t.Errorf("Visit() = %v, want the server's 400", err)
	}
	if n := requests.Load(); n > 4 {
		t.Errorf("%d requests, want at most one a slice", n)
	}
}

// TestVisitInterrupted: a visit whose context ends returns the progress
// of the pages accepted, and its cause.
func TestVisitInterrupted(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 2000, 64, nil)
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 2, WantedDocumentCount: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pages := 0
	p, err := c.Visit(ctx, Progress{}, func(Page) error {
		if pages++; pages == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || p.Complete() || p.Slices != 2 {
		t.Errorf("Visit() = %+v, %v; want the progress so far and context.Canceled", p, err)
	}
}

// TestVisitMaxOutage: a server that answers nothing but 503 ends the visit
// with ErrMaxOutage once MaxOutage has passed, though its breaker holds
// the requests while it is open.
func TestVisitMaxOutage(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 100, 4, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 2, MaxOutage: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Visit(t.Context(), Progress{}, func(Page) error { return nil })
	if !errors.Is(err, ErrMaxOutage) || p.Complete() {
		t.Errorf("Visit() = %+v, %v; want ErrMaxOutage", p, err)
	}
}

// TestProgressSlicesDone: SlicesDone counts the slices visited to their
// end, as a visit interrupted part way and one run to its end leave them.
func TestProgressSlicesDone(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 400, 8, nil)
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 4, WantedDocumentCount: 10, Pages: true})
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := collect(t, c, Progress{}, 3)
	if n := p.SlicesDone(); n >= 4 || p.Complete() {
		t.Errorf("after 3 pages: %d slices done, want fewer than 4", n)
	}
	_, p, err = collect(t, c, p, 0)
	if n := p.SlicesDone(); err != nil || n != 4 || !p.Complete() {
		t.Errorf("at the end: %d slices done, %v; want 4", n, err)
	}
}
