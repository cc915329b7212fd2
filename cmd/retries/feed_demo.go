package main

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/seed32e55400/retries"
)

// demoSource generates the demo's puts: documents 0 to n−1.
type demoSource struct{ i, n int }

func (s *demoSource) next() (*operation, error) {
	if s.i >= s.n {
		return nil, io.EOF
	}
	id := strconv.Itoa(s.i)
	s.i++
	return &operation{kind: opPut, id: id, line: s.i, path: demoPath + id, body: docBody(id), safe: true}, nil
}

// feedDemo starts the demo server on a loopback port and feeds cfg.docs
// documents into it through the engine of the feed command: DocV1 around
// Throttle, with a limiter of at most cfg.concurrency requests in flight on
// the inner layer and a retry budget on the outer one. It returns the
// counts, and reports progress to out every cfg.progress. When ctx ends,
// the documents not yet fed are lost.
func feedDemo(ctx context.Context, cfg demoConfig, out io.Writer) (demoResult, error) {
	burst := cfg.burst
	if burst == 0 {
		burst = max(1, math.Floor(cfg.rate/4))
	}
	srv := newDemoServer(cfg.rate, burst, cfg.faults)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return demoResult{}, err
	}
	hs := &http.Server{Handler: srv.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	var (
		c   counters
		mu  sync.Mutex // guards res.givenUp and res.lastErr
		res = demoResult{docs: cfg.docs}
	)
	fixed := 0
	if cfg.fixed {
		fixed = cfg.concurrency
	}
	f, err := newFeeder(feedConfig{
		url:         "http://" + ln.Addr().String(),
		maxInFlight: cfg.concurrency,
		concurrency: fixed,
		attempt:     30 * time.Second,
		outer:       cfg.outer, inner: cfg.inner,
		budget:   retries.NewBudget(feedBudgetRatio, feedBudgetPerSecond),
		wrapBase: func(rt http.RoundTripper) http.RoundTripper { return countingTransport{base: rt, c: &c} },
		onSend:   func(*operation) { c.started.Add(1) },
		onDone: func(op *operation, ok bool, err error) {
			if ok {
				c.done.Add(1)
				return
			}
			mu.Lock()
			res.givenUp = append(res.givenUp, op.id)
			res.lastErr = err
			mu.Unlock()
		},
	})
	if err != nil {
		return demoResult{}, err
	}
	start := time.Now()
	doneCh := make(chan struct{})
	var pwg sync.WaitGroup
	if cfg.progress > 0 && out != nil {
		pwg.Go(func() { reportProgress(out, cfg, &c, start, doneCh) })
	}
	fr := f.run(ctx, &demoSource{n: cfg.docs})
	res.elapsed = time.Since(start)
	close(doneCh)
	pwg.Wait()

	res.limiter, res.budget = fr.limiter, fr.budget
	res.requests, res.got429, res.got503 = c.requests.Load(), c.got429.Load(), c.got503.Load()
	res.connErrors, res.retries, res.done = c.connErrors.Load(), c.retries(), c.done.Load()
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
