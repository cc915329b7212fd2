package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The query mode (-query): -containers Vespa containers on loopback ports,
// each answering a query in -service (4 ms by default, the p50 of a small
// application), jittered by up to a tenth. -tail SHARE+EXTRA holds a share
// of the queries of the first -tail-on containers EXTRA longer (a slow
// node, a GC); -pause EVERY+DUR holds every answer of every container for
// DUR every EVERY; with -inflight K a container serves K queries at once
// and answers 503 beyond, as Vespa does without a search thread free. The
// query file ($ARENA_QUERIES, -docs lines) holds ok queries and, with
// -bad SHARE, that share of bad ones in turn: an illegal query (400), one
// soft doomed (500) and one whose answer has degraded coverage (200).
// With -broken N, the last N containers answer every query with a 500
// "internal server error" (a broken container, a proxy before a dead
// one), at once.
//
// The feeder gets $ARENA_URL_0 … and $ARENA_URLS ("-url A -url B …", for
// a shell to split) and $ARENA_QUERIES. The line is counted from what the
// containers served: the requests each got and their statuses, the tail
// and paused answers, and the largest timeout a request carried.

// queryConfig is the query mode's own flags.
type queryConfig struct {
	containers int
	tail       string // SHARE+EXTRA
	tailOn     int
	pause      string // EVERY+DUR
	bad        float64
	broken     int
}

// containerStats are one container's counts.
type containerStats struct {
	requests, held, paused, refused atomic.Int64
	status                          sync.Map // status → *atomic.Int64
	maxTimeout                      atomic.Int64
}

func (s *containerStats) count(status int) {
	v, _ := s.status.LoadOrStore(status, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// queryContainer is one container.
type queryContainer struct {
	c          config
	tailShare  float64
	tailExtra  time.Duration
	hasTail    bool
	pauseEvery time.Duration
	pauseDur   time.Duration
	start      time.Time
	slots      chan struct{} // nil: no limit
	broken     bool
	stats      containerStats
	arrivals   *arrivalLog // shared by the containers
}

// arrivalLog keeps when each request arrived at any container, for the
// line's inter-arrival figures: what a bench's -arrivals looks like from
// the servers.
type arrivalLog struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivalLog) add(t time.Time) {
	a.mu.Lock()
	a.at = append(a.at, t)
	a.mu.Unlock()
}

// figures returns the requests' arrival rate (over the time from the first
// to the last) and the coefficient of variation of the gaps between them:
// about 1 for Poisson arrivals, about 0 for evenly spaced ones.
func (a *arrivalLog) figures() (rate, cv float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.at) < 3 {
		return 0, 0
	}
	slices.SortFunc(a.at, func(x, y time.Time) int { return x.Compare(y) })
	n := float64(len(a.at) - 1)
	var sum, sq float64
	for i := 1; i < len(a.at); i++ {
		g := a.at[i].Sub(a.at[i-1]).Seconds()
		sum, sq = sum+g, sq+g*g
	}
	mean := sum / n
	return 1 / mean, math.Sqrt(max(sq/n-mean*mean, 0)) / mean
}

const (
	resultOK       = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"coverage":{"coverage":100,"documents":1000,"full":true,"nodes":1,"results":1,"resultsFull":1},"children":[{"id":"id:music:music::1","relevance":0.9,"source":"music","fields":{"title":"a"}}]}}`
	resultDegraded = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},"coverage":{"coverage":50,"documents":500,"full":false,"nodes":1,"results":1,"resultsFull":0,"degraded":{"match-phase":false,"timeout":true,"adaptive-timeout":false,"non-ideal-state":false}},"children":[{"id":"id:music:music::1","relevance":0.9,"fields":{}}]}}`
	resultIllegal  = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":3,"summary":"Illegal query","message":"Could not parse 'select'"}]}}`
	resultDoomed   = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":12,"summary":"Timed out","message":"Query soft doomed during query setup"}]}}`
	resultInternal = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":8,"summary":"Internal server error","message":"internal server error"}]}}`
	resultNoThread = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"errors":[{"code":10,"summary":"Backend communication error","message":"No search threads available"}]}}`
)

func (q *queryContainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.arrivals.add(time.Now())
	q.stats.requests.Add(1)
	params := r.URL.Query()
	if t, err := time.ParseDuration(strings.ReplaceAll(params.Get("timeout"), " ", "")); err == nil {
		for {
			m := q.stats.maxTimeout.Load()
			if int64(t) <= m || q.stats.maxTimeout.CompareAndSwap(m, int64(t)) {
				break
			}
		}
	}
	if q.broken {
		q.answer(w, http.StatusInternalServerError, resultInternal)
		return
	}
	if q.slots != nil {
		select {
		case q.slots <- struct{}{}:
			defer func() { <-q.slots }()
		default:
			q.stats.refused.Add(1)
			q.answer(w, http.StatusServiceUnavailable, resultNoThread)
			return
		}
	}
	service := q.c.service
	if service <= 0 {
		service = 4 * time.Millisecond
	}
	d := service + time.Duration(rand.Int64N(int64(service)/10+1))
	if q.hasTail && rand.Float64() < q.tailShare {
		d += q.tailExtra
		q.stats.held.Add(1)
	}
	if q.pauseEvery > 0 {
		// Every answer waits out a pause that is on when it would be sent.
		at := time.Since(q.start) + d
		if in := at % q.pauseEvery; in < q.pauseDur {
			d += q.pauseDur - in
			q.stats.paused.Add(1)
		}
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		return
	}
	switch params.Get("case") {
	case "illegal":
		q.answer(w, http.StatusBadRequest, resultIllegal)
	case "doomed":
		q.answer(w, http.StatusInternalServerError, resultDoomed)
	case "degraded":
		q.answer(w, http.StatusOK, resultDegraded)
	default:
		q.answer(w, http.StatusOK, resultOK)
	}
}

func (q *queryContainer) answer(w http.ResponseWriter, status int, body string) {
	q.stats.count(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// parsePlus reads SHARE+EXTRA or EVERY+DUR.
func parsePlus(flagName, s string, first func(string) error) (time.Duration, error) {
	a, b, ok := strings.Cut(s, "+")
	if !ok {
		return 0, fmt.Errorf("%s %q: want A+DURATION", flagName, s)
	}
	if err := first(a); err != nil {
		return 0, fmt.Errorf("%s %q: %v", flagName, s, err)
	}
	d, err := time.ParseDuration(b)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive duration after +", flagName, s)
	}
	return d, nil
}

// runQuery starts the containers, writes the query file, runs the
// feeder and returns the line.
func runQuery(c config, feeder []string) (string, int, error) {
	qc := c.query
	if qc.containers < 1 {
		qc.containers = 3
	}
	dir, err := os.MkdirTemp("", "arena-query")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)
	var share float64
	var extra, every, pauseDur time.Duration
	if qc.tail != "" {
		if extra, err = parsePlus("-tail", qc.tail, func(a string) error {
			var err error
			share, err = strconv.ParseFloat(a, 64)
			if err != nil || share < 0 || share > 1 {
				return errors.New("want a share from 0 to 1 before +")
			}
			return nil
		}); err != nil {
			return "", 0, err
		}
	}
	if qc.pause != "" {
		if pauseDur, err = parsePlus("-pause", qc.pause, func(a string) error {
			var err error
			every, err = time.ParseDuration(a)
			if err != nil || every <= 0 {
				return errors.New("want a positive duration before +")
			}
			return nil
		}); err != nil {
			return "", 0, err
		}
		if pauseDur >= every {
			return "", 0, fmt.Errorf("-pause %q: the pause must be shorter than its period", qc.pause)
		}
	}
	start := time.Now()
	var containers []*queryContainer
	arrivals := &arrivalLog{}
	env := map[string]string{}
	var urls []string
	for i := range qc.containers {
		q := &queryContainer{c: c, tailShare: share, tailExtra: extra, hasTail: i < max(qc.tailOn, 1), pauseEvery: every, pauseDur: pauseDur, start: start,
			broken: i >= qc.containers-qc.broken, arrivals: arrivals}
		if c.inflight > 0 {
			q.slots = make(chan struct{}, c.inflight)
		}
		addr, stop, err := serveLoopback(q)
		if err != nil {
			return "", 0, err
		}
		defer stop()
		u := "http://" + addr.String()
		env["ARENA_URL_"+strconv.Itoa(i)] = u
		urls = append(urls, "-url "+u)
		containers = append(containers, q)
	}
	env["ARENA_URLS"] = strings.Join(urls, " ")
	env["ARENA_URL"] = env["ARENA_URL_0"]
	queries := filepath.Join(dir, "queries.txt")
	if err := writeQueries(queries, c.docs, qc.bad); err != nil {
		return "", 0, err
	}
	env["ARENA_QUERIES"] = queries
	if len(feeder) == 0 {
		var started atomic.Int64
		return "", 0, serveUntilSignal(env, &started)
	}
	r, err := runFeeder(feeder, env, c.limit, start)
	if err != nil {
		return "", 0, err
	}
	rate, cv := arrivals.figures()
	return queryLine(c, r.exit, time.Since(start), containers, r.cpu) + fmt.Sprintf(" arrivals=(%.1f/s cv=%.2f)", rate, cv), r.exit, nil
}

// writeQueries writes n queries, a share bad of them bad in turn
// (illegal, soft doomed, degraded).
func writeQueries(path string, n int, bad float64) error {
	var b strings.Builder
	badEvery := 0
	if bad > 0 {
		badEvery = max(int(1/bad), 1)
	}
	kinds := []string{"illegal", "doomed", "degraded"}
	for i := range n {
		kind := "ok"
		if badEvery > 0 && i%badEvery == badEvery-1 {
			kind = kinds[(i/badEvery)%len(kinds)]
		}
		fmt.Fprintf(&b, "/search/?yql=select+*+from+music+where+title+contains+%%22t%d%%22&hits=10&case=%s\n", i, kind)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// queryLine is the line of a query run, from the containers' counts.
func queryLine(c config, exit int, elapsed time.Duration, cs []*queryContainer, cpu time.Duration) string {
	var total, held, paused, refused, maxTimeout int64
	statuses := map[int]int64{}
	var each []string
	for i, q := range cs {
		n := q.stats.requests.Load()
		total += n
		held += q.stats.held.Load()
		paused += q.stats.paused.Load()
		refused += q.stats.refused.Load()
		maxTimeout = max(maxTimeout, q.stats.maxTimeout.Load())
		q.stats.status.Range(func(k, v any) bool {
			statuses[k.(int)] += v.(*atomic.Int64).Load()
			return true
		})
		each = append(each, fmt.Sprintf("c%d:%d", i, n))
	}
	var st []string
	for _, k := range slices.Sorted(maps.Keys(statuses)) {
		st = append(st, fmt.Sprintf("%d:%d", k, statuses[k]))
	}
	return fmt.Sprintf("%-22s exit=%d containers=%d requests=%d (%s) statuses=(%s) held=%d paused=%d refused=%d max-timeout=%v elapsed=%.2fs cpu=%.2fs",
		c.label, exit, len(cs), total, strings.Join(each, " "), strings.Join(st, " "), held, paused, refused,
		time.Duration(maxTimeout), elapsed.Seconds(), cpu.Seconds())
}
