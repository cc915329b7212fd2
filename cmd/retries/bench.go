package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/query"
)

// benchFlags are the flags of the bench command.
type benchFlags struct {
	urls         urlsFlag
	rate         string
	duration     time.Duration
	deadline     time.Duration
	hedge        string
	jsonOut      string
	slo          time.Duration
	arrivals     string
	asserts      string
	plot         string
	quiet, http2 bool
	conn         connFlags
}

func addBenchFlags(fs *flag.FlagSet, f *benchFlags) {
	fs.Var(&f.urls, "url", "a container's `URL` (required); repeat it for several, each query going to the next in turn")
	fs.StringVar(&f.rate, "rate", "", "`QPS` queries a second, open loop (required); A:B:STEP steps the rate from A to B and reports the knee")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to offer the rate (each step's, with A:B:STEP)")
	fs.DurationVar(&f.deadline, "deadline", time.Second, "each query's deadline, from the time it is due: Vespa's timeout is what is left of it")
	fs.StringVar(&f.hedge, "hedge", "auto", "auto: hedge after the 97th percentile of recent round trips, within the budget; off: never")
	fs.StringVar(&f.jsonOut, "json", "", "write the report to `FILE` as JSON too")
	fs.StringVar(&f.plot, "plot", "", "draw the run to `FILE` as SVG: the latency percentiles and the answers second by second; with -rate A:B:STEP, the latency–throughput curve with the knee")
	fs.StringVar(&f.arrivals, "arrivals", "constant", "how queries arrive: constant, query i due at i/QPS (vespa-fbench's -r), or poisson, independent exponential gaps of mean 1/QPS (bursts, as many users make)")
	fs.StringVar(&f.asserts, "assert", "", "thresholds that set the exit status, after the report: `EXPR[,EXPR…]` over p50, p90, p95, p99, p999 and max (with ms, s or us), failed and degraded (shares: 1% or 0.01) and rate (queries/s sent), such as 'p99<=20ms,failed<1%'; exit 1 naming each breached (in every step of -rate A:B:STEP)")
	fs.DurationVar(&f.slo, "slo", 100*time.Millisecond, "with -rate A:B:STEP: the p99 a step's rate must keep to count for the knee")
	fs.BoolVar(&f.quiet, "q", false, "no line per second")
	fs.BoolVar(&f.http2, "http2", false, "HTTP/2: by prior knowledge on http URLs, by ALPN on https (vespa-fbench speaks HTTP/1.1 only)")
	addConnFlags(fs, &f.conn)
}

// benchQuery is a line of the query file: what is sent, and the line.
type benchQuery struct {
	q    query.Query
	line int
}

// readQueries reads a query file as vespa-fbench reads one: a path and
// query string a line (/search/?yql=…), or, for a line starting with {, a
// JSON query body to POST. Empty lines and lines starting with # are
// skipped.
func readQueries(r io.Reader) ([]benchQuery, error) {
	var qs []benchQuery
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "{"):
			if !json.Valid([]byte(line)) {
				return nil, fmt.Errorf("line %d: not a JSON object", n)
			}
			qs = append(qs, benchQuery{query.Query{Body: []byte(line)}, n})
		default:
			u, err := url.Parse(line)
			if err != nil || !strings.HasPrefix(u.Path, "/") || u.Host != "" {
				return nil, fmt.Errorf("line %d: want a path and query string such as /search/?yql=…, or a JSON object", n)
			}
			// The query string as written: url.Query would drop a pair with
			// a ";" or a "%" that starts no escape, and benchmark another
			// query.
			qs = append(qs, benchQuery{query.Query{Path: u.Path, RawQuery: u.RawQuery}, n})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, errors.New("no query")
	}
	return qs, nil
}

// parseRate reads -rate: QPS, or A:B:STEP.
func parseRate(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	var v []float64
	for _, p := range parts {
		x, err := strconv.ParseFloat(p, 64)
		if err != nil || x <= 0 || x > 1e6 || math.IsNaN(x) {
			return nil, fmt.Errorf("-rate %q: want QPS or A:B:STEP, each above 0 and at most 1000000", s)
		}
		v = append(v, x)
	}
	switch {
	case len(v) == 1:
		return v, nil
	case len(v) == 3 && v[0] <= v[1]:
		var rates []float64
		for r := v[0]; r <= v[1]+1e-9 && len(rates) < 1000; r += v[2] {
			rates = append(rates, r)
		}
		return rates, nil
	}
	return nil, fmt.Errorf("-rate %q: want QPS or A:B:STEP with A at most B", s)
}

// runBench is the bench command: its flags checked, the queries read and
// the -json FILE opened, each rate run, the knee found and the reports
// written.
func runBench(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fset := newFlagSet("bench")
	var f benchFlags
	addBenchFlags(fset, &f)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	rates, err := f.check(pos)
	if err != nil {
		return err
	}
	asserts, err := parseAsserts(f.asserts)
	if err != nil {
		return usageErrorf("bench: -assert: %v", err)
	}
	qs, err := readQueryFile(pos[0], stdin)
	if err != nil {
		return err
	}
	header, tlsCfg, err := f.conn.load()
	if err != nil {
		return setupErrorf("bench: %v", err)
	}
	var jsonOut *os.File
	if f.jsonOut != "" {
		// Opened now, so that a FILE that cannot be written is said
		// before the run, not after it.
		if jsonOut, err = os.OpenFile(f.jsonOut, os.O_WRONLY|os.O_CREATE, 0o644); err != nil {
			return setupErrorf("bench: -json: %v", err)
		}
		defer jsonOut.Close()
	}
	var plotOut *os.File
	if f.plot != "" {
		if plotOut, err = os.Create(f.plot); err != nil {
			return setupErrorf("bench: -plot: %v", err)
		}
		defer plotOut.Close()
	}
	c, err := query.New(query.Config{URLs: f.urls, Header: header, TLS: tlsCfg, HTTP2: f.http2, NoHedge: f.hedge == "off"})
	if err != nil {
		return usageErrorf("bench: %v", err)
	}
	var reports []*benchReport
	for _, rate := range rates {
		r := runRate(ctx, c, qs, rate, &f, stderr)
		reports = append(reports, r)
		if _, err := io.WriteString(stdout, r.text()); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	var knee *benchReport
	if len(rates) > 1 {
		knee = findKnee(reports, f.slo, stdout)
	}
	if jsonOut != nil {
		if err := writeBenchJSON(jsonOut, reports, knee, f.slo); err != nil {
			return err
		}
	}
	if plotOut != nil {
		if err := plotBench(plotOut, reports, knee, f.slo); err != nil {
			return fmt.Errorf("bench: -plot: %v", err)
		}
	}
	if ctx.Err() != nil {
		return silentExit(exitInterrupted)
	}
	return checkAsserts(asserts, reports, stderr)
}

// check returns the rates to run, or a usage error for flags and
// arguments pos that cannot make a bench.
func (f *benchFlags) check(pos []string) ([]float64, error) {
	switch {
	case f.conn.header.check() != nil:
		return nil, usageErrorf("bench: %v", f.conn.header.check())
	case len(f.urls) == 0 || f.rate == "":
		return nil, usageErrorf("bench: -url and -rate are required")
	case len(pos) != 1:
		return nil, usageErrorf("bench: want one query FILE, or - for stdin")
	case f.hedge != "auto" && f.hedge != "off":
		return nil, usageErrorf("bench: -hedge %q: want auto or off", f.hedge)
	case f.duration <= 0 || f.duration > 24*time.Hour || f.deadline <= 0 || f.slo <= 0:
		return nil, usageErrorf("bench: -duration (at most 24h), -deadline and -slo must be above 0")
	case f.arrivals != "constant" && f.arrivals != "poisson":
		return nil, usageErrorf("bench: -arrivals %q: want constant or poisson", f.arrivals)
	}
	rates, err := parseRate(f.rate)
	if err != nil {
		return nil, usageErrorf("bench: %v", err)
	}
	return rates, nil
}

// readQueryFile reads the queries of path, or of stdin for -.
func readQueryFile(path string, stdin io.Reader) ([]benchQuery, error) {
	in := stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, setupErrorf("bench: %v", err)
		}
		defer file.Close()
		in = file
	}
	qs, err := readQueries(in)
	if err != nil {
		return nil, setupErrorf("bench: %s: %v", path, err)
	}
	return qs, nil
}

// findKnee returns the highest rate of a step run whose p99 stays under
// slo with failed and degraded under 1 %, or nil, and says which on w.
func findKnee(reports []*benchReport, slo time.Duration, w io.Writer) *benchReport {
	var knee *benchReport
	for _, r := range reports {
		if r.p(0.99) <= slo && float64(r.Degraded+r.Failed) < 0.01*float64(r.Queries) {
			knee = r
		}
	}
	if knee != nil {
		fmt.Fprintf(w, "knee: %.0f queries/s, the highest rate whose p99 stays under %v with failed and degraded under 1 %%\n", knee.Offered, slo)
	} else {
		fmt.Fprintf(w, "knee: none of the rates kept p99 under %v with failed and degraded under 1 %%\n", slo)
	}
	return knee
}

// writeBenchJSON writes the -json report: one rate's, or a step run's
// steps with the knee.
func writeBenchJSON(out *os.File, reports []*benchReport, knee *benchReport, slo time.Duration) error {
	var v any = reports[0].json()
	if len(reports) > 1 {
		steps := make([]any, len(reports))
		for i, r := range reports {
			steps[i] = r.json()
		}
		k := map[string]any{"steps": steps, "slo_ms": ms(slo), "knee_rate": nil}
		if knee != nil {
			k["knee_rate"] = knee.Offered
		}
		v = k
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAll(out, append(data, '\n')); err != nil {
		return fmt.Errorf("bench: -json: %v", err)
	}
	return nil
}

// benchReport is what one rate came to.
type benchReport struct {
	Offered, Achieved                    float64
	Duration                             time.Duration
	Queries, OK, Degraded, Failed        int64
	Requests, Retries, Hedges, HedgesWon int64
	Late                                 int64
	HedgesRefused                        int64
	ZeroHits                             int64
	Status                               map[string]int64
	fromDue, fromSend                    []time.Duration
	okLatency                            []time.Duration // from the due time, of the ok answers alone
	start                                time.Time
	arrivals                             string   // constant or poisson
	timeline                             []second // by the second the queries were due in
	endpoints                            map[string]*endpointRow
	cpu                                  time.Duration
	mu                                   sync.Mutex
}

// endpointRow is one endpoint's share of the answers, and how often and
// for how long its breaker was open during the run.
type endpointRow struct {
	answers, ok int64
	latency     []time.Duration
	opened      int64
	openFor     time.Duration
}

// runRate offers rate queries a second for f.duration, open loop: each
// query is due at its arrival (see arrivals) whatever the answers do, and
// its latency counts from then (and, apart, from its send).
func runRate(ctx context.Context, c *query.Client, qs []benchQuery, rate float64, f *benchFlags, stderr io.Writer) *benchReport {
	d, deadline, quiet := f.duration, f.deadline, f.quiet
	r := &benchReport{Offered: rate, Status: map[string]int64{}, endpoints: map[string]*endpointRow{}}
	arr := newArrivals(rate, f.arrivals == "poisson", uint64(time.Now().UnixNano()))
	before := c.Stats()
	cpu0 := cpuTime()
	start := time.Now()
	r.start, r.arrivals = start, f.arrivals
	var wg sync.WaitGroup
	nextLine := start.Add(time.Second)
	for i := int64(0); ; i++ { // the queries due before d
		at := arr.due(i)
		if at >= d {
			break
		}
		due := start.Add(at)
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		if time.Since(due) > time.Millisecond {
			r.Late++ // sent more than a millisecond after it was due
		}
		if !quiet && time.Now().After(nextLine) {
			nextLine = nextLine.Add(time.Second)
			fmt.Fprintln(stderr, r.line(time.Since(start), i))
		}
		q := qs[i%int64(len(qs))]
		wg.Go(func() { r.one(ctx, c, q, due, deadline) })
	}
	offered := time.Since(start) // the queries were sent over this long
	wg.Wait()
	r.Duration = time.Since(start)
	r.cpu = cpuTime() - cpu0
	after := c.Stats()
	r.Requests, r.Retries = after.Requests-before.Requests, after.Retries-before.Retries
	r.Hedges, r.HedgesWon = after.Hedges-before.Hedges, after.HedgesWon-before.HedgesWon
	r.HedgesRefused = after.Refused - before.Refused
	for i, e := range after.Endpoints {
		row := r.row(e.URL) // every endpoint has a row, answered or not
		row.opened = e.Breaker.Opened - before.Endpoints[i].Breaker.Opened
		row.openFor = e.Breaker.OpenFor - before.Endpoints[i].Breaker.OpenFor
	}
	// The rate achieved is that of the sends, over the time they took (the
	// last answers' wait left out): an open loop that fell behind shows
	// here, and in Late.
	if r.Queries > 1 && offered > 0 {
		r.Achieved = float64(r.Queries-1) / offered.Seconds()
	}
	return r
}

// line is the line a second of a run, elapsed after its start, due
// queries due so far: how they ended, and, while some fail, the statuses
// other than 200 so far, so that a wrong port or a refusing container is
// said at once.
func (r *benchReport) line(elapsed time.Duration, due int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := fmt.Sprintf("bench %5.1fs: %d due, %d ok, %d degraded, %d failed", elapsed.Seconds(), due, r.OK, r.Degraded, r.Failed)
	var other []string
	for _, k := range slices.Sorted(maps.Keys(r.Status)) {
		if k != "200" {
			other = append(other, fmt.Sprintf("%s: %d", k, r.Status[k]))
		}
	}
	if len(other) > 0 {
		l += " (" + strings.Join(other, ", ") + ")"
	}
	return l
}

// row returns endpoint's row, made at its first use. r.mu is held, or
// no query runs.
func (r *benchReport) row(endpoint string) *endpointRow {
	row := r.endpoints[endpoint]
	if row == nil {
		row = &endpointRow{}
		r.endpoints[endpoint] = row
	}
	return row
}

// one sends q, due at due, with deadline from then, and counts it.
func (r *benchReport) one(ctx context.Context, c *query.Client, q benchQuery, due time.Time, deadline time.Duration) {
	ctx, cancel := context.WithDeadline(ctx, due.Add(deadline))
	defer cancel()
	sent := time.Now()
	res, err := c.Search(ctx, q.q)
	end := time.Now()
	fromDue, fromSend := end.Sub(due), end.Sub(sent)
	status, endpoint := "", ""
	var se *query.StatusError
	switch {
	case err == nil:
		status, endpoint = "200", res.Endpoint
	case errors.As(err, &se):
		status, endpoint = strconv.Itoa(se.Status), se.Endpoint
	case errors.Is(err, context.DeadlineExceeded):
		status = "deadline"
	case errors.Is(err, retries.ErrBreakerOpen):
		status = "every breaker open"
	case errors.Is(err, syscall.ECONNREFUSED):
		status = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		status = "connection reset"
	case retries.IsConnectionError(err):
		status = "connection error"
	default:
		status = "error"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Queries++
	r.Status[status]++
	ok := err == nil && res.Complete() && fromDue <= deadline
	switch {
	case ok:
		r.OK++
	case err == nil && fromDue <= deadline:
		r.Degraded++
	default:
		r.Failed++
	}
	if err == nil && res.TotalCount == 0 && len(res.Hits) == 0 {
		r.ZeroHits++
	}
	r.fromDue = append(r.fromDue, fromDue)
	r.fromSend = append(r.fromSend, fromSend)
	if ok {
		r.okLatency = append(r.okLatency, fromDue)
	}
	r.tally(due, ok, err == nil && fromDue <= deadline, fromDue)
	if endpoint != "" {
		row := r.row(endpoint)
		row.answers++
		if ok {
			row.ok++
		}
		row.latency = append(row.latency, fromSend)
	}
}

// quantile returns the q quantile of ds (sorted in place), or 0.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}

// p returns the q quantile of the latencies from the due times.
func (r *benchReport) p(q float64) time.Duration { return quantile(r.fromDue, q) }

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// text is the report in vespa-fbench's layout, with what it leaves out:
// degraded answers apart from the successful ones, the rate offered and
// achieved, hedges, and latency from the due time (coordinated omission
// corrected) beside latency from the send.
func (r *benchReport) text() string {
	var b strings.Builder
	w := func(name, format string, a ...any) {
		fmt.Fprintf(&b, "%-28s"+format+"\n", append([]any{name + ":"}, a...)...)
	}
	b.WriteString("***************** Benchmark Summary *****************\n")
	w("offered query rate", "%10.1f Q/s", r.Offered)
	w("ran for", "%10.1f seconds", r.Duration.Seconds())
	w("queries due", "%10d", r.Queries)
	w("sent late (over 1 ms)", "%10d", r.Late)
	w("ok", "%10d", r.OK)
	w("degraded", "%10d  (200 with errors or partial coverage, within the deadline)", r.Degraded)
	w("failed", "%10d  (any other answer, or past the deadline)", r.Failed)
	w("requests", "%10d  (%d hedges, %d of them taken, %d refused by the budget)", r.Requests, r.Hedges, r.HedgesWon, r.HedgesRefused)
	fromDue := slices.Clone(r.fromDue)
	fromSend := slices.Clone(r.fromSend)
	if len(fromDue) > 0 {
		var sum time.Duration
		for _, d := range fromDue {
			sum += d
		}
		w("minimum response time", "%10.2f ms", ms(quantile(fromDue, 0)))
		w("maximum response time", "%10.2f ms", ms(fromDue[len(fromDue)-1]))
		w("average response time", "%10.2f ms", ms(sum/time.Duration(len(fromDue))))
		for _, q := range []float64{25, 50, 75, 90, 95, 98, 99, 99.5, 99.9} {
			w(strconv.FormatFloat(q, 'f', -1, 64)+" percentile", "%10.2f ms  (%.2f ms from the send)", ms(quantile(fromDue, q/100)), ms(quantile(fromSend, q/100)))
		}
	}
	if len(r.okLatency) > 0 {
		ok := slices.Clone(r.okLatency)
		w("ok answers' response time", "%10.2f ms p50, %.2f ms p99, %.2f ms p99.9, %.2f ms max  (the ok answers alone, from the due time)",
			ms(quantile(ok, 0.5)), ms(quantile(ok, 0.99)), ms(quantile(ok, 0.999)), ms(quantile(ok, 1)))
	}
	w("actual query rate", "%10.1f Q/s  (sent)", r.Achieved)
	if r.Achieved < 0.99*r.Offered {
		fmt.Fprintf(&b, "could not keep the offered rate: %.1f of %.1f queries/s sent (the machine, or the queries file's reading, fell behind)\n", r.Achieved, r.Offered)
	}
	if r.Queries > 0 {
		w("cpu per query", "%10.1f µs", float64(r.cpu.Microseconds())/float64(r.Queries))
	}
	w("zero hit queries", "%10d", r.ZeroHits)
	b.WriteString("http request status breakdown:\n")
	for _, k := range slices.Sorted(maps.Keys(r.Status)) {
		fmt.Fprintf(&b, "  %16s : %8d\n", k, r.Status[k])
	}
	b.WriteString("endpoints:\n")
	for _, k := range slices.Sorted(maps.Keys(r.endpoints)) {
		e := r.endpoints[k]
		fmt.Fprintf(&b, "  %s: %d answers, %d ok", k, e.answers, e.ok)
		if e.answers > 0 {
			fmt.Fprintf(&b, ", p99 %.2f ms from the send", ms(quantile(e.latency, 0.99)))
		}
		if e.opened > 0 {
			times := "times"
			if e.opened == 1 {
				times = "time"
			}
			fmt.Fprintf(&b, "; its breaker open %.1f s (opened %d %s)", e.openFor.Seconds(), e.opened, times)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// json is the report as -json writes it.
func (r *benchReport) json() map[string]any {
	lat := func(ds []time.Duration) map[string]float64 {
		ds = slices.Clone(ds)
		return map[string]float64{"p50": ms(quantile(ds, 0.5)), "p90": ms(quantile(ds, 0.9)), "p95": ms(quantile(ds, 0.95)),
			"p99": ms(quantile(ds, 0.99)), "p999": ms(quantile(ds, 0.999)), "max": ms(quantile(ds, 1))}
	}
	var eps []map[string]any
	for _, k := range slices.Sorted(maps.Keys(r.endpoints)) {
		e := r.endpoints[k]
		eps = append(eps, map[string]any{"url": k, "answers": e.answers, "ok": e.ok, "p99_ms": ms(quantile(e.latency, 0.99)),
			"breaker_opened": e.opened, "breaker_open_s": math.Round(e.openFor.Seconds()*1000) / 1000})
	}
	cpu := 0.0
	if r.Queries > 0 {
		cpu = float64(r.cpu.Microseconds()) / float64(r.Queries)
	}
	return map[string]any{
		"queries": r.Queries, "ok": r.OK, "degraded": r.Degraded, "failed": r.Failed, "requests": r.Requests,
		"hedges": r.Hedges, "hedges_won": r.HedgesWon, "hedges_refused": r.HedgesRefused, "retries": r.Retries, "status": r.Status,
		"latency_ms": lat(r.fromDue), "latency_from_send_ms": lat(r.fromSend), "latency_ok_ms": lat(r.okLatency),
		"timeline": r.timelineJSON(), "arrivals": r.arrivals,
		"offered_rate": r.Offered, "achieved_rate": math.Round(r.Achieved*10) / 10, "late": r.Late,
		"zero_hits": r.ZeroHits, "seconds": math.Round(r.Duration.Seconds()*1000) / 1000, "cpu_us_per_query": math.Round(cpu*10) / 10,
		"endpoints": eps,
	}
}

// cpuTime returns the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeAll makes f hold data alone, and closes it.
func writeAll(f *os.File, data []byte) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
