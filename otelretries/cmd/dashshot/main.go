// Command dashshot draws the panels of this project's Grafana dashboard
// (otelretries/dashboard/retries.json) from a real run, as an SVG: it
// copies a corpus from one document/v1 endpoint to another with packages
// visit and feed, with every instrument of otelretries registered, scrapes
// the OpenTelemetry Prometheus exporter every -every, and evaluates each
// panel's queries over the scrapes with the small subset of PromQL the
// dashboard uses (see promql.go). Grafana draws the real thing; this is
// for a picture in the docs, from a clone. Run it as the feeder of the
// arena (bench/cmd/arena) in -copy mode:
//
//	arena -copy -docs 30000 -rate 1500 -outage 8s+4s -outage-on put -- dashshot -from '$ARENA_URL' -to '$ARENA_URL_TO' -o dashboard.svg
//
// and turn the SVG into a PNG with rsvg-convert (Debian's librsvg2-bin).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"iter"
	"maps"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/otelretries"
	"github.com/seed32e55400/retries/visit"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	from := flag.String("from", "", "the document/v1 endpoint to visit")
	to := flag.String("to", "", "the document/v1 endpoint to feed")
	dashboard := flag.String("dashboard", "dashboard/retries.json", "the Grafana dashboard")
	out := flag.String("o", "dashboard.svg", "the SVG to write")
	every := flag.Duration("every", 500*time.Millisecond, "the time between scrapes")
	note := flag.String("note", "", "a line under the title")
	flag.Parse()
	if *from == "" || *to == "" {
		fmt.Fprintln(os.Stderr, "usage: dashshot -from URL -to URL [-dashboard FILE] [-o FILE]")
		os.Exit(2)
	}
	if err := run(*from, *to, *dashboard, *out, *note, *every); err != nil {
		fmt.Fprintln(os.Stderr, "dashshot:", err)
		os.Exit(1)
	}
}

func run(from, to, dashboard, out, note string, every time.Duration) error {
	panels, err := readDashboard(dashboard)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)))
	obs, err := otelretries.NewObserver(mp, otelretries.WithoutSpans())
	if err != nil {
		return err
	}
	budget := retries.NewBudget(0.1, 5)
	fc, err := feed.New(feed.Config{URL: to, Calls: obs, Budget: budget, Log: io.Discard})
	if err != nil {
		return err
	}
	defer fc.Close()
	vc, err := visit.New(visit.Config{URL: from, Cluster: "music", Slices: 4, WantedDocumentCount: 128, Pages: true})
	if err != nil {
		return err
	}
	regs := []func() error{
		func() error { _, err := otelretries.RegisterFeed("copy", fc, mp); return err },
		func() error { _, err := otelretries.RegisterBudget("copy", budget, mp); return err },
		func() error { _, err := otelretries.RegisterVisit("source", vc, mp); return err },
	}
	for _, e := range fc.Endpoints() {
		regs = append(regs,
			func() error { _, err := otelretries.RegisterLimiter("destination", e.Limiter, mp); return err },
			func() error { _, err := otelretries.RegisterBreaker("destination", e.Breaker, mp); return err })
	}
	for _, r := range regs {
		if err := r(); err != nil {
			return err
		}
	}

	db := &tsdb{series: map[string]*series{}}
	start := time.Now()
	var times []float64
	scrape := func() error {
		t := time.Since(start).Seconds()
		fams, err := reg.Gather()
		if err != nil {
			return err
		}
		addFamilies(db, fams, t)
		times = append(times, t)
		return nil
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapeErr error
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := scrape(); err != nil {
					scrapeErr = err
					return
				}
			}
		}
	})
	// The visit ends when the feed does: a feed that stops (a TLS error,
	// say) reads no more of docs.
	visitCtx, endVisit := context.WithCancel(context.Background())
	defer endVisit()
	docs := make(chan feed.Operation, 512)
	var visitErr error
	wg.Go(func() {
		defer close(docs)
		_, visitErr = vc.Visit(visitCtx, visit.Progress{}, func(p visit.Page) error {
			for _, d := range p.Documents {
				select {
				case docs <- feed.Operation{Kind: feed.Put, ID: d.ID, Fields: d.Fields}:
				case <-visitCtx.Done():
					return visitCtx.Err()
				}
			}
			return nil
		})
	})
	feedErr := fc.Feed(context.Background(), fromChannel(docs), nil)
	endVisit()
	if feedErr == nil {
		time.Sleep(2 * every) // the last rates settle
	}
	close(stop)
	wg.Wait()
	switch {
	case scrapeErr != nil:
		return scrapeErr
	case feedErr != nil:
		return fmt.Errorf("feed: %w", feedErr)
	case visitErr != nil:
		return fmt.Errorf("visit: %w", visitErr)
	}
	if err := scrape(); err != nil {
		return err
	}
	window := math.Max(2, 4*every.Seconds()) // $__rate_interval
	for i := range panels {
		evaluate(&panels[i], db, times, window)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if note == "" {
		s := fc.Stats()
		note = fmt.Sprintf("a copy: %d documents acknowledged, %d failed, %d requests, %d of them 429, %d paused by outages; the Kafka and Queries rows are empty (no member or query client ran)",
			s.Acknowledged, s.Failed, s.Requests, s.Throttled, s.Pauses)
	}
	writeSVG(f, "retries: the dashboard over a real run (otelretries/dashboard/retries.json, drawn by otelretries/cmd/dashshot)", note, panels, times[len(times)-1], every.Seconds())
	return f.Close()
}

// fromChannel yields the operations of ch until it closes.
func fromChannel(ch <-chan feed.Operation) iter.Seq2[feed.Operation, error] {
	return func(yield func(feed.Operation, error) bool) {
		for op := range ch {
			if !yield(op, nil) {
				return
			}
		}
	}
}

// addFamilies adds a scrape at t: each counter and gauge as a series, each
// histogram as its _bucket (by le, cumulative), _sum and _count series,
// named as the Prometheus exposition names them.
func addFamilies(db *tsdb, fams []*dto.MetricFamily, t float64) {
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			l := labels{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			with := func(name string, extra ...string) labels {
				out := maps.Clone(l)
				out["__name__"] = name
				for i := 0; i+1 < len(extra); i += 2 {
					out[extra[i]] = extra[i+1]
				}
				return out
			}
			name := mf.GetName()
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				db.add(with(name), t, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				db.add(with(name), t, m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					db.add(with(name+"_bucket", "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), t, float64(b.GetCumulativeCount()))
				}
				db.add(with(name+"_bucket", "le", "+Inf"), t, float64(h.GetSampleCount()))
				db.add(with(name+"_sum"), t, h.GetSampleSum())
				db.add(with(name+"_count"), t, float64(h.GetSampleCount()))
			}
		}
	}
}

// readDashboard reads the dashboard's panels, rows included.
// allValues gives the dashboard's variables the value Grafana gives them
// with All selected: one run scraped has one job and instance.
var allValues = strings.NewReplacer("$job", ".*", "$instance", ".*")

func readDashboard(path string) ([]panelData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Type, Title string
			GridPos     struct{ X, Y, W, H int } `json:"gridPos"`
			FieldConfig struct {
				Defaults struct{ Unit string }
			} `json:"fieldConfig"`
			Targets []struct {
				Expr, LegendFormat string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []panelData
	for _, p := range d.Panels {
		pd := panelData{title: p.Title, unit: p.FieldConfig.Defaults.Unit, row: p.Type == "row",
			x: p.GridPos.X, y: p.GridPos.Y, w: p.GridPos.W, h: p.GridPos.H}
		for _, t := range p.Targets {
			pd.targets = append(pd.targets, target{allValues.Replace(t.Expr), t.LegendFormat})
		}
		out = append(out, pd)
	}
	return out, nil
}

var legendLabel = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// evaluate evaluates p's queries at each time and fills its lines.
func evaluate(p *panelData, db *tsdb, times []float64, window float64) {
	byLegend := map[string]*line{}
	for _, tg := range p.targets {
		n, err := parse(tg.expr)
		if err != nil {
			p.err = err.Error()
			return
		}
		for _, t := range times {
			v, err := n.eval(db, t, window)
			if err != nil {
				p.err = err.Error()
				return
			}
			for _, s := range v {
				if math.IsNaN(s.v) || math.IsInf(s.v, 0) {
					continue
				}
				legend := strings.TrimSpace(legendLabel.ReplaceAllStringFunc(tg.legend, func(m string) string {
					return s.l[legendLabel.FindStringSubmatch(m)[1]]
				}))
				l := byLegend[legend]
				if l == nil {
					l = &line{legend: legend}
					byLegend[legend] = l
				}
				l.t, l.v = append(l.t, t), append(l.v, s.v)
			}
		}
	}
	for _, l := range byLegend {
		p.lines = append(p.lines, *l)
	}
	sortLines(p.lines)
}
