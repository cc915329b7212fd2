package main

import (
	"testing"
	"time"

	"github.com/seed32e55400/retries/visit"
)

// TestVisitProgressLine: a visit's progress line has its rate, its slices
// done and the server's 429s, and while requests fail, for how long, why
// and how long the visit waits more; it used to say only the documents.
func TestVisitProgressLine(t *testing.T) {
	t.Parallel()
	p := &visitProgress{slices: 8, maxOutage: 5 * time.Minute}
	p.note(visit.Page{Documents: make([]visit.Document, 1200), Progress: visit.Progress{Slices: 8, Done: []bool{true, false, true, false, false, false, false, false}}})
	for _, tc := range []struct {
		stats visit.Stats
		want  string
	}{
		{visit.Stats{}, "visit   3.0s: 1200 documents, 400/s, 2 of 8 slices done"},
		{visit.Stats{Throttled: 5}, "visit   3.0s: 1200 documents, 400/s, 2 of 8 slices done, 5 throttled (429)"},
		{visit.Stats{Failing: "dial tcp 127.0.0.1:1: connect: connection refused", FailingFor: 2*time.Minute + 30*time.Second},
			"visit   3.0s: 1200 documents, 400/s, 2 of 8 slices done; failing for 2m30s: dial tcp 127.0.0.1:1: connect: connection refused; ending in 2m30s unless a request succeeds (-max-outage)"},
		{visit.Stats{Failing: "visit: 503 Service Unavailable", FailingFor: 4*time.Minute + 58*time.Second + 660*time.Millisecond},
			"visit   3.0s: 1200 documents, 400/s, 2 of 8 slices done; failing for 4m58.7s: visit: 503 Service Unavailable; ending in 1.3s unless a request succeeds (-max-outage)"},
	} {
		if got := p.line("visit", 3*time.Second, 400, tc.stats); got != tc.want {
			t.Errorf("line(%+v) =\n%s\nwant\n%s", tc.stats, got, tc.want)
		}
	}
}
