package visit

import (
	"testing"

	"github.com/seed32e55400/retries/visit/visittest"
)

// TestVisitStats: after a visit whose streams were cut now and then, the
// client's counts say what happened: every document handed out once, the
// server's requests all counted, cuts among them, and what was read
// again dropped; nothing in flight.
func TestVisitStats(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 3000, 101, cutting(0.3, 60, 11))
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 3, WantedDocumentCount: 200})
	if err != nil {
		t.Fatal(err)
	}
	got, p, err := collect(t, c, Progress{}, 0)
	if err != nil || !p.Complete() {
		t.Fatalf("Visit = %+v, %v", p, err)
	}
	checkOnce(t, got, 3000)
	s := c.Stats()
	if s.Documents != 3000 || s.Requests != int64(srv.Requests()) || s.Cut == 0 || s.Throttled != 0 || s.Failed != 0 ||
		s.InFlight != 0 || s.Limit < 1 || s.Documents+s.Dropped > int64(srv.Sent()) {
		t.Errorf("Stats() = %+v; want 3000 documents, the server's %d requests, some cut, none failed, nothing in flight, at most the %d documents sent read",
			s, srv.Requests(), srv.Sent())
	}
}
