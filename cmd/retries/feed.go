package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
)

// Feed defaults.
const (
	// feedMaxInFlight caps the adaptive limiter: at most this many requests
	// in flight, and this many operations dispatched at once.
	feedMaxInFlight = 256
	// maxFeedConcurrency bounds -concurrency.
	maxFeedConcurrency = 4096
	maxFeedConnections = 4096
	// feedTimeout bounds one operation, its waits and retries included.
	feedTimeout = 2 * time.Minute
	// feedAttemptTimeout bounds one request until its response header.
	feedAttemptTimeout = 30 * time.Second
	// feedGrace is how long an interrupted feed waits for the operations in
	// flight before it cancels them.
	feedGrace = 5 * time.Second
	// Retries on the outer (DocV1) layer may number at most 10 % of the
	// operations plus 5 a second (50 in any 10 s), so that an outage costs
	// at most about 1.1 requests per document beyond the first 50 retries.
	// 429s, retried by the inner layer, are paced by the limiter instead.
	feedBudgetRatio     = 0.1
	feedBudgetPerSecond = 5
	// maxMessage bounds the part of a response body quoted in a report.
	maxMessage = 200
)

// feedConfig says how to feed.
type feedConfig struct {
	url         string      // the endpoint, such as http://localhost:8080
	header      http.Header // sent with every request; never printed
	concurrency int         // > 0: fixed, without a limiter; 0: the adaptive limiter
	maxInFlight int         // the limiter's cap; 0: feedMaxInFlight
	connections int         // per host; 0: no limit
	http2       bool        // HTTP/2 without TLS on http URLs (prior knowledge)
	timeout     time.Duration
	attempt     time.Duration // per request, until the response header; 0: none
	grace       time.Duration // after an interrupt

	// outer and inner are the policies around each request: DocV1 and
	// Throttle in the command; tests pass copies without waits.
	outer, inner retries.Policy
	budget       *retries.Budget // on the outer layer; nil: none

	progress time.Duration // between progress lines on errOut; 0: none
	errOut   io.Writer     // failures and progress

	// For the demo: wrapBase wraps the RoundTripper that goes on the wire,
	// and onDone sees the outcome of each operation.
	wrapBase func(http.RoundTripper) http.RoundTripper
	onSend   func(op *operation)
	onDone   func(op *operation, ok bool, err error)
}

// feedResult is what a feed did.
type feedResult struct {
	operations int64 // read from the input, bad ones included
	ok         int64 // acknowledged
	failed     int64 // operations that failed, bad input included
	badInput   int64
	unsent     []*operation // dispatched but not sent when interrupted
	unread     inputPos     // line > 0: the input from here on was not read (interrupted, or broken JSON)
	notFound   int64        // removes answered 404
	condFailed int64        // operations answered 412
	refusals   int64        // retries the budget refused
	inFlight   int64        // requests in flight at the end
	elapsed    time.Duration
	wire       *wireStats
	limiter    *retries.Limiter // nil with a fixed concurrency
	budget     *retries.Budget
	lastErr    error // the error of the last failed operation
}

// feeder sends operations to a document/v1 endpoint.
type feeder struct {
	cfg              feedConfig
	base             string // the endpoint without a trailing slash
	safe, unsafe     *http.Client
	transport        *http.Transport
	limiter          *retries.Limiter
	wire             wireStats
	out              *lockedWriter
	ok, failed, cond atomic.Int64
	notFound, refuse atomic.Int64

	mu      sync.Mutex
	busy    map[string][]*operation // per document id: the operations waiting behind the one in flight
	unsent  []*operation
	lastErr error
}

func newFeeder(cfg feedConfig) (*feeder, error) {
	u, err := url.Parse(cfg.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("feed: -url %q: want http://HOST[:PORT] or https://…", cfg.url)
	}
	if cfg.maxInFlight == 0 {
		cfg.maxInFlight = feedMaxInFlight
	}
	if cfg.errOut == nil {
		cfg.errOut = io.Discard
	}
	f := &feeder{cfg: cfg, base: strings.TrimRight(cfg.url, "/"), out: &lockedWriter{w: cfg.errOut}, busy: map[string][]*operation{}}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = cfg.connections
	tr.MaxIdleConnsPerHost = max(cfg.connections, f.slots())
	tr.MaxIdleConns = tr.MaxIdleConnsPerHost
	if cfg.http2 {
		// Prior knowledge on http URLs, as Vespa's feed client does;
		// ALPN on https.
		var p http.Protocols
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	f.transport = tr
	var base http.RoundTripper = tr
	if cfg.wrapBase != nil {
		base = cfg.wrapBase(base)
	}
	inner := cfg.inner
	if cfg.concurrency == 0 {
		f.limiter = retries.NewLimiter(retries.LimiterConfig{MaxInFlight: cfg.maxInFlight})
		inner = inner.Copy(retries.WithLimiter(f.limiter))
	}
	var topts []retries.TransportOption
	if cfg.attempt > 0 {
		topts = append(topts, retries.WithAttemptTimeout(cfg.attempt))
	}
	innerT := retries.NewTransport(wireCounter{base: base, s: &f.wire}, inner, topts...)
	outer := func(pred retries.Predicate) *http.Client {
		p := cfg.outer.Copy(
			retries.WithRetry(pred),
			retries.WithBudget(cfg.budget),
			retries.WithOnExhausted(func(s retries.State) error {
				if !errors.Is(s.Refusal, retries.ErrBudgetExhausted) {
					return retries.ReturnLastOutcome(s)
				}
				// Say why the operation failed: the budget, after this
				// outcome.
				f.refuse.Add(1)
				last := s.Err
				if resp, ok := s.Value.(*http.Response); ok {
					last = errors.New(resp.Status)
				}
				return fmt.Errorf("%v; %w", last, s.Refusal)
			}),
		)
		return &http.Client{
			Transport: retries.NewTransport(innerT, p),
			// A redirect is reported, not followed: a POST must not turn
			// into a GET.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	f.safe, f.unsafe = outer(retrySafe), outer(retryUnsafe)
	return f, nil
}

// slots is the number of operations dispatched at once, in flight or
// waiting behind another operation on the same document.
func (f *feeder) slots() int {
	if f.cfg.concurrency > 0 {
		return f.cfg.concurrency
	}
	return f.cfg.maxInFlight
}

// opSource yields operations as opReader.next does.
type opSource interface {
	next() (*operation, error)
}

// run feeds the operations of src until it ends or ctx is done. When ctx
// ends, it stops reading and dispatching, waits up to cfg.grace for the
// operations in flight, then cancels them.
func (f *feeder) run(ctx context.Context, src opSource) feedResult {
	start := time.Now()
	defer f.transport.CloseIdleConnections()
	// Requests run under their own context, canceled cfg.grace after ctx
	// ends or when the feed is over.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		t := time.NewTimer(f.cfg.grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancelSend()
		case <-finished:
		}
	}()
	var progressDone chan struct{}
	if f.cfg.progress > 0 {
		progressDone = make(chan struct{})
		go f.reportProgress(start, finished, progressDone)
	}

	var (
		res   feedResult
		slots = make(chan struct{}, f.slots())
		wg    sync.WaitGroup
	)
	// The input is read on its own goroutine, so that an interrupt ends
	// the feed even while a read blocks (a quiet pipe on stdin); that
	// goroutine then stays blocked until the process exits.
	items := make(chan readItem)
	stopRead := make(chan struct{})
	defer close(stopRead)
	go readOps(src, items, stopRead)
	next, eof := inputPos{line: 1}, false // where the input not yet taken starts
read:
	for {
		var it readItem
		select {
		case it = <-items:
		case <-ctx.Done():
			break read
		}
		op, err := it.op, it.err
		if it.after.line > 0 {
			next = it.after
		}
		var bad *badInput
		var stop *inputError
		switch {
		case err == io.EOF:
			eof = true
			break read
		case errors.As(err, &bad):
			res.operations++
			res.badInput++
			f.failed.Add(1)
			f.out.printf("retries feed: %v (skipped)\n", err)
			continue
		case errors.As(err, &stop):
			// Reported here, and not as an interrupt below.
			res.badInput++
			f.failed.Add(1)
			f.out.printf("retries feed: %v\n", err)
			res.unread, eof = stop.from, true
			break read
		case err != nil:
			f.failed.Add(1)
			f.out.printf("retries feed: %v\n", err)
			eof = true
			break read
		}
		res.operations++
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			f.mu.Lock()
			f.unsent = append(f.unsent, op)
			f.mu.Unlock()
			break read
		}
		f.dispatch(ctx, sendCtx, op, slots, &wg)
	}
	if !eof {
		res.unread = next
	}
	wg.Wait()
	close(finished)
	if progressDone != nil {
		<-progressDone
	}
	res.elapsed = time.Since(start)
	res.ok, res.failed = f.ok.Load(), f.failed.Load()
	res.notFound, res.condFailed, res.refusals = f.notFound.Load(), f.cond.Load(), f.refuse.Load()
	res.inFlight = f.wire.inFlight.Load()
	res.wire, res.limiter, res.budget = &f.wire, f.limiter, f.cfg.budget
	f.mu.Lock()
	res.unsent, res.lastErr = f.unsent, f.lastErr
	f.mu.Unlock()
	res.failed += int64(len(res.unsent))
	for _, op := range res.unsent {
		f.out.printf("retries feed: not sent: %s\n", op.name())
	}
	if !eof {
		f.out.printf("retries feed: interrupted: the input from %v on was not read\n", res.unread)
	}
	return res
}

// readItem is what readOps read: an operation, or an error of opSource.
type readItem struct {
	op    *operation
	err   error
	after inputPos // where the input after op or a *badInput starts; line 0 if unknown
}

// readOps sends what src yields to items until src ends or stop is closed.
func readOps(src opSource, items chan<- readItem, stop <-chan struct{}) {
	for {
		op, err := src.next()
		it := readItem{op: op, err: err}
		var bad *badInput
		switch {
		case op != nil:
			it.after = op.after
		case errors.As(err, &bad):
			it.after = bad.after
		}
		select {
		case items <- it:
		case <-stop:
			return
		}
		if err != nil && bad == nil {
			return
		}
	}
}

// dispatch starts op, or queues it behind the operation in flight for the
// same document, so that operations on one document are applied in input
// order and a retry never overtakes a later operation.
func (f *feeder) dispatch(ctx, sendCtx context.Context, op *operation, slots chan struct{}, wg *sync.WaitGroup) {
	f.mu.Lock()
	if q, ok := f.busy[op.id]; ok {
		f.busy[op.id] = append(q, op)
		f.mu.Unlock()
		return
	}
	f.busy[op.id] = nil
	f.mu.Unlock()
	wg.Go(func() {
		for op != nil {
			f.send(sendCtx, op)
			<-slots
			f.mu.Lock()
			q := f.busy[op.id]
			switch {
			case len(q) == 0:
				delete(f.busy, op.id)
				op = nil
			case ctx.Err() != nil: // interrupted: send nothing more
				f.unsent = append(f.unsent, q...)
				for range q {
					<-slots
				}
				delete(f.busy, op.id)
				op = nil
			default:
				op, f.busy[op.id] = q[0], q[1:]
			}
			f.mu.Unlock()
		}
	})
}

// send sends op through the retrying clients and reports a failure.
func (f *feeder) send(ctx context.Context, op *operation) {
	if f.cfg.onSend != nil {
		f.cfg.onSend(op)
	}
	ctx = withAttempts(ctx)
	if f.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.cfg.timeout)
		defer cancel()
	}
	var body io.Reader
	if op.body != nil {
		body = bytes.NewReader(op.body)
	}
	req, err := http.NewRequestWithContext(ctx, op.kind.method(), f.base+op.path, body)
	if err != nil {
		f.fail(op, err)
		return
	}
	for name, vs := range f.cfg.header {
		req.Header[name] = vs
	}
	if h := f.cfg.header.Get("Host"); h != "" {
		req.Host = h
	}
	if op.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := f.safe
	if !op.safe {
		client = f.unsafe
	}
	resp, err := client.Do(req)
	if err != nil {
		// The *TransportError inside names the method and URL already.
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err
		}
		f.fail(op, err)
		return
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
	case resp.StatusCode == http.StatusPreconditionFailed:
		f.cond.Add(1) // an answer: the condition was not met
	case resp.StatusCode == http.StatusNotFound && op.kind == opRemove:
		f.notFound.Add(1) // an answer: there was nothing to remove
	default:
		f.fail(op, fmt.Errorf("%s: %s", resp.Status, message(data)))
		return
	}
	f.ok.Add(1)
	if f.cfg.onDone != nil {
		f.cfg.onDone(op, true, nil)
	}
}

func (f *feeder) fail(op *operation, err error) {
	f.failed.Add(1)
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
	f.out.printf("retries feed: failed: %s: %v\n", op.name(), err)
	if f.cfg.onDone != nil {
		f.cfg.onDone(op, false, err)
	}
}

// message returns the "message" of a document/v1 error body, or the body
// itself, cut short.
func message(body []byte) string {
	var v struct {
		Message string `json:"message"`
	}
	s := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &v) == nil && v.Message != "" {
		s = v.Message
	}
	if s == "" {
		return "(empty body)"
	}
	return cut(s, maxMessage)
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// reportProgress prints a progress line every cfg.progress until finished
// is closed, then closes done.
func (f *feeder) reportProgress(start time.Time, finished <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(f.cfg.progress)
	defer t.Stop()
	lastT, lastN := start, int64(0)
	for {
		select {
		case <-finished:
			return
		case now := <-t.C:
			n := f.ok.Load()
			rate := float64(n-lastN) / now.Sub(lastT).Seconds()
			lastT, lastN = now, n
			limit := strconv.Itoa(f.cfg.concurrency) + " (fixed)"
			if f.limiter != nil {
				limit = strconv.FormatFloat(f.limiter.Stats().Limit, 'g', 4, 64)
			}
			f.out.printf("feed %5.1fs: %6.0f docs/s, %d acknowledged, %d failed, %d in flight, limit %s, %d×429, %d retries\n",
				now.Sub(start).Seconds(), rate, n, f.failed.Load(), f.wire.inFlight.Load(), limit,
				f.wire.throttled.Load(), f.wire.retries.Load())
		}
	}
}

// lockedWriter serialises the lines written to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

// summary returns the feed's summary as JSON, with the keys of Vespa's
// `vespa feed` first and this command's own under "retries.".
func (r feedResult) summary() []byte {
	secs := r.elapsed.Seconds()
	per := func(n int64) float64 {
		if secs <= 0 {
			return 0
		}
		return round3(float64(n) / secs)
	}
	lo, avg, hi, codes := r.wire.latency()
	codeCounts := map[string]int64{}
	for c, n := range codes {
		codeCounts[strconv.Itoa(c)] = n
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	reqBytes, respBytes := r.wire.requestBytes.Load(), r.wire.responseBytes.Load()
	unsent := make([]string, len(r.unsent))
	for i, op := range r.unsent {
		unsent[i] = op.id
	}
	kv := []struct {
		k string
		v any
	}{
		{"feeder.operation.count", r.operations},
		{"feeder.seconds", round3(secs)},
		{"feeder.ok.count", r.ok},
		{"feeder.ok.rate", per(r.ok)},
		{"feeder.error.count", r.failed},
		{"feeder.inflight.count", r.inFlight},
		{"http.request.count", r.wire.requests.Load()},
		{"http.request.bytes", reqBytes},
		{"http.request.MBps", round3(float64(per(reqBytes)) / 1e6)},
		{"http.exception.count", r.wire.exceptions.Load()},
		{"http.response.count", r.wire.responses.Load()},
		{"http.response.bytes", respBytes},
		{"http.response.MBps", round3(float64(per(respBytes)) / 1e6)},
		{"http.response.error.count", r.wire.responseErrors.Load()},
		{"http.response.latency.millis.min", ms(lo)},
		{"http.response.latency.millis.avg", ms(avg)},
		{"http.response.latency.millis.max", ms(hi)},
		{"http.response.code.counts", codeCounts},
		{"retries.retry.count", r.wire.retries.Load()},
		{"retries.badinput.count", r.badInput},
		{"retries.unsent.count", len(r.unsent)},
		{"retries.unsent.ids", unsent},
		{"retries.unread.line", r.unread.line},
		{"retries.unread.offset", r.unread.off},
		{"retries.conditionnotmet.count", r.condFailed},
		{"retries.remove.notfound.count", r.notFound},
		{"retries.limiter", limiterJSON(r.limiter)},
		{"retries.budget", budgetJSON(r.budget, r.refusals)},
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, e := range kv {
		v, _ := json.Marshal(e.v)
		fmt.Fprintf(&b, "  %q: %s", e.k, v)
		if i < len(kv)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}

// limiterJSON is the limiter's final state, or nil for a fixed concurrency.
func limiterJSON(l *retries.Limiter) any {
	if l == nil {
		return nil
	}
	s := l.Stats()
	return map[string]any{
		"limit": round3(s.Limit), "rate": round3(s.Rate), "inflight": s.InFlight, "waiting": s.Waiting,
		"successes": s.Successes, "throttles": s.Throttles, "failures": s.Failures,
	}
}

// budgetJSON is the budget's state over its last 10 s, and the retries it
// refused over the whole feed.
func budgetJSON(b *retries.Budget, refusals int64) any {
	if b == nil {
		return nil
	}
	s := b.Stats()
	return map[string]any{
		"ratio": s.Ratio, "minpersecond": s.MinPerSecond, "refused": refusals,
		"window.seconds": 10, "window.deposits": s.Deposits, "window.retries": s.Retries,
		"window.refusals": s.Refusals, "window.available": s.Available,
	}
}

// headerFlag collects -header 'Name: value' flags. Its String names the
// headers without their values, which may be secrets.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string {
	if f == nil || len(f.h) == 0 {
		return ""
	}
	names := make([]string, 0, len(f.h))
	for n := range f.h {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return errors.New("want 'Name: value'")
	}
	if strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("header %s: the value holds a line break", name)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, value)
	return nil
}

// feedOuter is the outer layer of a feed: DocV1, but waiting U(0, 0.2 s)
// then U(0, 0.4 s) instead of 1 s then 2 s. The retry budget bounds what
// retries cost a struggling server, and the limiter paces the load, so a
// 503 or a reset on one of the last documents need not hold up the end of
// a feed for seconds. retries.DocV1 itself keeps pyvespa's numbers.
var feedOuter = retries.DocV1.Copy(retries.WithWait(retries.WaitRandomExponential(
	retries.Exponential{Multiplier: 200 * time.Millisecond, Max: 2 * time.Second})))

// feedFlags are the flags of the feed command.
type feedFlags struct {
	url                      string
	concurrency, connections int
	http2, quiet             bool
	timeout                  time.Duration
	header                   headerFlag
}

// addFeedFlags defines the feed command's flags on fs.
func addFeedFlags(fs *flag.FlagSet, f *feedFlags) {
	fs.StringVar(&f.url, "url", "", "the document/v1 endpoint, such as http://localhost:8080 (required)")
	intVar(fs, &f.concurrency, "concurrency", 0, 0, maxFeedConcurrency, "`N` requests in flight, fixed; 0: the adaptive limiter decides")
	intVar(fs, &f.connections, "connections", 0, 0, maxFeedConnections, "`N` connections per host; 0: as many as needed")
	fs.BoolVar(&f.http2, "http2", false, "HTTP/2 without TLS on http URLs (prior knowledge)")
	fs.DurationVar(&f.timeout, "timeout", feedTimeout, "time limit of each operation, its retries included; 0: none")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines")
	fs.Var(&f.header, "header", "`Name: value` sent with every request (repeatable); never printed")
}

// runFeed is the feed command.
func runFeed(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("feed")
	var f feedFlags
	addFeedFlags(fs, &f)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case f.url == "":
		return usageErrorf("feed: -url is required")
	case len(pos) == 0:
		return usageErrorf("feed: name a FILE, or - for stdin")
	case len(pos) > 1:
		return usageErrorf("feed: unexpected argument %q", pos[1])
	case f.timeout < 0:
		return usageErrorf("feed: -timeout %v: must not be negative", f.timeout)
	}
	in := stdin
	if pos[0] != "-" {
		file, err := os.Open(pos[0])
		if err != nil {
			return usageErrorf("feed: %v", err)
		}
		defer file.Close()
		in = file
	}
	cfg := feedConfig{
		url: f.url, header: f.header.h, concurrency: f.concurrency, connections: f.connections, http2: f.http2,
		timeout: f.timeout, attempt: feedAttemptTimeout, grace: feedGrace,
		outer: feedOuter, inner: retries.Throttle,
		budget:   retries.NewBudget(feedBudgetRatio, feedBudgetPerSecond),
		progress: time.Second, errOut: stderr,
	}
	if f.quiet {
		cfg.progress = 0
	}
	res, err := feed(ctx, cfg, in, stdout)
	if err != nil {
		return err
	}
	if res.failed > 0 || res.unread.line != 0 {
		return errSilent
	}
	return nil
}

// errSilent makes the command exit 1 without a message of its own: the
// feed has reported each failure already.
var errSilent = errors.New("")

// feed runs a feed of the operations in in and writes its summary to
// stdout.
func feed(ctx context.Context, cfg feedConfig, in io.Reader, stdout io.Writer) (feedResult, error) {
	f, err := newFeeder(cfg)
	if err != nil {
		return feedResult{}, err
	}
	res := f.run(ctx, newOpReader(in))
	_, err = stdout.Write(res.summary())
	return res, err
}
