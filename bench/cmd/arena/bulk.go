package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries/visit/visittest"
)

// The bulk mode (-bulk): a store of -docs documents (id:music:music::N,
// fields {"n": N}) in -buckets buckets that deletes and updates by
// selection as Vespa's document/v1 handler does (package
// visit/visittest): a request processes 4 buckets of its slice, each
// taking -bucket-time, then answers documentCount and a continuation;
// -inflight such requests are served at once, 429 beyond. -bulk-faults
// A,B,C fails shares of the requests: A a 500 after part of its chunk, B
// a 504 with no bucket processed, C a connection cut after part of its
// chunk, none of them with a continuation; -outage AT+DUR answers 503
// meanwhile. The feeder gets $ARENA_URL and $ARENA_SELECTION (-selection,
// "music.n % 2 == 0" by default). The line counts, from the store, the
// documents the selection matches and those deleted or updated, once or
// more, and the buckets processed (those processed again included).

// bulkConfig is the bulk mode's own flags.
type bulkConfig struct {
	faults    string // A,B,C
	selection string
}

// parseShares reads -bulk-faults A,B,C: three shares of the requests
// (500 after part of a chunk, 504 after part, cut), adding up to at most 1.
func parseShares(faults string) (shares [3]float64, err error) {
	if faults == "" {
		return shares, nil
	}
	parts := strings.Split(faults, ",")
	if len(parts) != 3 {
		return shares, fmt.Errorf("-bulk-faults %q: want three shares, A,B,C", faults)
	}
	sum := 0.0
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 {
			return shares, fmt.Errorf("-bulk-faults %q: want shares from 0 to 1", faults)
		}
		shares[i] = v
		sum += v
	}
	if sum > 1 {
		return shares, fmt.Errorf("-bulk-faults %q: the shares add up to more than 1", faults)
	}
	return shares, nil
}

func runBulk(c config, feeder []string) (string, int, error) {
	shares, err := parseShares(c.bulk.faults)
	if err != nil {
		return "", 0, err
	}
	at, dur, err := parseOutage(c.outage)
	if err != nil {
		return "", 0, err
	}
	sel := c.bulk.selection
	if sel == "" {
		sel = "music.n % 2 == 0"
	}
	var started atomic.Int64
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(c.seed, 13))
	var counts [4]atomic.Int64 // 500, 504, cut, outage
	srv := visittest.NewUnstartedServer(c.docs, c.buckets, func(r *http.Request, _ int) int {
		if r.Method == http.MethodGet {
			return 0 // a -verify visit
		}
		if dur > 0 {
			if since := time.Since(time.Unix(0, started.Load())); since >= at && since < at+dur {
				counts[3].Add(1)
				return http.StatusServiceUnavailable
			}
		}
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		switch {
		case x < shares[0]:
			counts[0].Add(1)
			return visittest.FailAfterPart(http.StatusInternalServerError)
		case x < shares[0]+shares[1]:
			counts[1].Add(1)
			return visittest.FailAfterPart(http.StatusGatewayTimeout)
		case x < shares[0]+shares[1]+shares[2]:
			counts[2].Add(1)
			return visittest.CutAfter(0)
		}
		return 0
	})
	srv.BucketTime, srv.MaxVisits = c.bucketTime, c.inflight
	srv.Start()
	defer srv.Close()
	env := map[string]string{"ARENA_URL": srv.URL, "ARENA_SELECTION": sel}
	if len(feeder) == 0 {
		return "", 0, serveUntilSignal(env, &started)
	}
	matches, err := selects(sel)
	if err != nil {
		return "", 0, err
	}
	start := time.Now()
	started.Store(start.UnixNano())
	r, err := runFeeder(feeder, env, c.limit, start)
	if err != nil {
		return "", 0, err
	}
	t := tally(srv, c.docs, matches)
	return fmt.Sprintf("%-22s exit=%d matched=%d deleted=%d updated-once=%d updated-twice=%d left=%d others-touched=%d buckets=%d/%d requests=%d refused=%d faults=(500:%d 504:%d cut:%d outage:%d) elapsed=%.2fs cpu=%.2fs",
		c.label, r.exit, t.matched, t.deleted, t.once, t.twice, t.left, t.others, srv.ProcessedBuckets(), c.buckets, srv.Requests(), srv.Refused(),
		counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load(), time.Since(start).Seconds(), r.cpu.Seconds()), r.exit, nil
}

// bulkTally is what the store holds after a run, document by document.
type bulkTally struct {
	matched, deleted, left, others, once, twice int
}

// tally counts the documents the selection matches (matches) and what
// became of them, and those it does not match that were touched.
func tally(srv *visittest.Server, docs int, matches func(int) bool) (t bulkTally) {
	updates := srv.Updates()
	for d := range docs {
		m, del, k := matches(d), srv.IsDeleted(d), updates[d]
		if !m {
			if del || k > 0 {
				t.others++
			}
			continue
		}
		t.matched++
		switch {
		case del:
			t.deleted++
		case k == 0:
			t.left++
		}
		switch {
		case k == 1:
			t.once++
		case k > 1:
			t.twice++
		}
	}
	return t
}

// selects returns which documents sel matches, for the line: the
// selections of the store's documents that the line reads, "true" and
// "music.n % M == R".
func selects(sel string) (func(int) bool, error) {
	if sel == "true" {
		return func(int) bool { return true }, nil
	}
	var m, r int
	if _, err := fmt.Sscanf(sel, "music.n %% %d == %d", &m, &r); err != nil || m <= 0 {
		return nil, errors.New(`-selection: want "true" or "music.n % M == R" (the line counts by it)`)
	}
	return func(d int) bool { return d%m == r }, nil
}
