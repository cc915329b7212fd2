package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed32e55400/retries/feed"
)

// demoOps yields the demo's feed: puts of documents 0 to n−1.
func demoOps(n int) iter.Seq2[feed.Operation, error] {
	return func(yield func(feed.Operation, error) bool) {
		for i := range n {
			id := strconv.Itoa(i)
			if !yield(feed.Operation{Kind: feed.Put, ID: "id:demo:doc::" + id, Fields: docFields(id)}, nil) {
				return
			}
		}
	}
}

// demoGivenUp collects the documents the feed gave up on: it is the
// Feed's done.
type demoGivenUp struct {
	mu      sync.Mutex
	ids     []string
	lastErr error
}

func (g *demoGivenUp) done(op feed.Operation, _ feed.Result, err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = append(g.ids, strings.TrimPrefix(op.ID, "id:demo:doc::"))
	g.lastErr = err
}

// demoLine is the demo's progress line for a feed of docs documents.
func demoLine(docs int) func(feed.Progress) string {
	return func(p feed.Progress) string {
		return fmt.Sprintf("%5.1f s  %*d/%d docs  %4.0f docs/s  retries %d: %d×429 %d×503 %d errors",
			p.Elapsed.Seconds(), len(strconv.Itoa(docs)), p.Acknowledged, docs, p.Rate,
			p.Retries, p.Throttled, p.Unavailable, p.Exceptions)
	}
}

// feedDemo starts the demo server on a loopback port and feeds cfg.docs
// documents into it through the engine of the feed command: DocV1 around
// Throttle, with a limiter of at most cfg.concurrency requests in flight on
// the inner layer and a retry budget on the outer one. It returns the
// counts, and reports progress to out every cfg.progress. When ctx ends,
// the documents not yet fed are lost.
func feedDemo(ctx context.Context, cfg demoConfig, out io.Writer) (demoResult, error) {
	srv, url, burst, stop, err := startDemoServer(cfg)
	if err != nil {
		return demoResult{}, err
	}
	defer stop()

	fixed := 0
	if cfg.fixed {
		fixed = cfg.concurrency
	}
	var givenUp demoGivenUp
	fcfg := feed.Config{
		URL:         url,
		MaxInFlight: cfg.concurrency,
		Concurrency: fixed,
		Outer:       cfg.outer, Inner: cfg.inner,
	}
	if cfg.progress > 0 && out != nil {
		fcfg.ProgressOut, fcfg.Progress, fcfg.Terminal = out, cfg.progress, cfg.terminal
		fcfg.ProgressLine = demoLine(cfg.docs)
	}
	f, err := feed.New(fcfg)
	if err != nil {
		return demoResult{}, err
	}
	start := time.Now()
	_ = f.Feed(ctx, demoOps(cfg.docs), givenUp.done) // the counts say what the error would
	fr := f.Report()
	res := demoResult{docs: cfg.docs, elapsed: time.Since(start), burst: burst, givenUp: givenUp.ids, lastErr: givenUp.lastErr}

	c := fr.Counts()
	res.limiter, res.budget = fr.Limiter, fr.Budget
	res.requests, res.got429, res.got503 = c.Requests, c.Throttled, c.Unavailable
	res.connErrors, res.retries, res.done = c.Exceptions, c.Retries, c.Acknowledged
	res.serverReqs, res.throttled, res.unavailable = srv.requests.Load(), srv.throttled.Load(), srv.unavailable.Load()
	res.resets, res.duplicates, res.rejected = srv.resets.Load(), srv.duplicates.Load(), srv.rejected.Load()
	acked := srv.ackedIDs()
	res.acked = len(acked)
	given := make(map[string]bool, len(res.givenUp))
	for _, id := range res.givenUp {
		given[id] = true
	}
	for i := range cfg.docs {
		id := strconv.Itoa(i)
		if given[id] || acked[id] == 0 {
			res.lost = append(res.lost, id)
		}
	}
	return res, nil
}

// plainDemo starts a demo server as feedDemo does and sends it each of
// cfg.docs documents once, with a plain net/http client and
// cfg.concurrency requests in flight: what the server does to a client
// without retries.
func plainDemo(ctx context.Context, cfg demoConfig) (demoResult, error) {
	srv, url, burst, stop, err := startDemoServer(cfg)
	if err != nil {
		return demoResult{}, err
	}
	defer stop()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.concurrency
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	base := url + demoPath
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Go(func() {
			for i := range next {
				id := strconv.Itoa(i)
				body := `{"fields":` + string(docFields(id)) + `}`
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+id, strings.NewReader(body))
				if err != nil {
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	for i := range cfg.docs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return demoResult{docs: cfg.docs, elapsed: time.Since(start), burst: burst, acked: len(srv.ackedIDs()),
		serverReqs: srv.requests.Load(), throttled: srv.throttled.Load(), unavailable: srv.unavailable.Load()}, nil
}

// startDemoServer starts the demo server of cfg on a loopback port, and
// returns it, its URL, its burst, and the function that stops it.
func startDemoServer(cfg demoConfig) (srv *demoServer, url string, burst float64, stop func(), err error) {
	burst = cfg.burst
	if burst == 0 {
		burst = max(1, math.Floor(cfg.rate/4))
	}
	srv = newDemoServer(cfg.rate, burst, cfg.faults)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", 0, nil, err
	}
	hs := &http.Server{Handler: srv.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), burst, func() { _ = hs.Close() }, nil
}
