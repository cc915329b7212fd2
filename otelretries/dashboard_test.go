package otelretries_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/otelretries"
	"github.com/seed32e55400/retries/query"
	"github.com/seed32e55400/retries/visit"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

//go:embed dashboard/retries.json
var dashboardJSON []byte

// exported runs every instrument of the module once through the
// OpenTelemetry Prometheus exporter, and returns the metric families it
// exposes, with their label names.
func exported(t *testing.T) map[string][]string {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)))
	obs, err := otelretries.NewObserver(mp, otelretries.WithoutSpans())
	if err != nil {
		t.Fatal(err)
	}
	l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
	b := retries.NewBreaker(retries.BreakerConfig{})
	budget := retries.NewBudget(0.1, 5)
	c, err := feed.New(feed.Config{URL: "http://127.0.0.1:1", Progress: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := visit.New(visit.Config{URL: "http://127.0.0.1:1", Cluster: "music"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := query.New(query.Config{URLs: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range []func() error{
		func() error { _, err := otelretries.RegisterLimiter("docs", l, mp); return err },
		func() error { _, err := otelretries.RegisterBreaker("docs", b, mp); return err },
		func() error { _, err := otelretries.RegisterBudget("docs", budget, mp); return err },
		func() error { _, err := otelretries.RegisterFeed("docs", c, mp); return err },
		func() error { _, err := otelretries.RegisterVisit("docs", v, mp); return err },
		func() error { _, err := otelretries.RegisterQuery("docs", q, mp); return err },
		func() error {
			stats := func() otelretries.KafkaStats { return otelretries.KafkaStats{Fed: 1, Lag: map[int32]int64{0: 3}} }
			_, err := otelretries.RegisterKafka("docs", stats, mp)
			return err
		},
	} {
		if err := reg(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// A call that returns a response after a retry and a wait, queued
	// behind another for the limiter's one permit.
	p := retries.New(retries.WithObserver(obs), retries.WithLimiter(l), retries.WithRetry(retries.RetryIfAnyError()),
		retries.WithStop(retries.StopAfterAttempt(3)), retries.WithWait(retries.WaitFixed(time.Millisecond)))
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Do(ctx, func(context.Context) error { <-release; return nil }) })
	synctest.Wait()
	wg.Go(func() {
		n := 0
		_, _ = retries.DoValue(ctx, p, func(context.Context) (*http.Response, error) {
			if n++; n == 1 {
				return nil, errors.New("connection reset by peer")
			}
			return &http.Response{StatusCode: http.StatusOK}, nil
		})
	})
	synctest.Wait()
	time.Sleep(time.Second)
	close(release)
	wg.Wait()
	// A retry the budget refuses, and a call held by an open breaker.
	none := retries.New(retries.WithObserver(obs), retries.WithBudget(retries.NewBudget(0, 0)), retries.WithStop(retries.StopAfterAttempt(3)))
	_ = none.Do(ctx, func(context.Context) error { return errors.New("boom") })
	inner := retries.New(retries.WithStop(retries.StopAfterAttempt(1)), retries.WithBreaker(b))
	for range 5 { // opens it: the calls held after it opened end with their contexts
		ctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_ = inner.Do(ctx, func(context.Context) error { return errors.New("down") })
		cancel()
	}
	_ = inner.Copy(retries.WithObserver(obs)).Do(ctx, func(context.Context) error { return nil })

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		var labels []string
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		out[f.GetName()] = labels
	}
	return out
}

// TestDashboardQueriesExportedMetrics: every metric and label that the
// Grafana dashboard's queries name is one the module exports through the
// OpenTelemetry Prometheus exporter, and every metric it exports has a
// panel.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		families := exported(t)
		var d struct {
			Panels []struct {
				Type, Title string
				Targets     []struct{ Expr, LegendFormat string }
			}
		}
		if err := json.Unmarshal(dashboardJSON, &d); err != nil {
			t.Fatal(err)
		}
		metricRE := regexp.MustCompile(`\bretries_[a-z0-9_]+`)
		labelRE := regexp.MustCompile(`(?:by \(([^)]*)\))|(?:\{([^}]*)\})`)
		used := map[string]bool{}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				var metrics []string
				// Metric names: what is left once label names (in by (...)
				// and in selectors) are taken out.
				for _, name := range metricRE.FindAllString(labelRE.ReplaceAllString(q.Expr, ""), -1) {
					family := name
					if _, ok := families[family]; !ok {
						for _, suffix := range []string{"_bucket", "_sum", "_count"} {
							family = strings.TrimSuffix(family, suffix)
						}
					}
					if _, ok := families[family]; !ok {
						t.Errorf("panel %q queries %s, which the module does not export", p.Title, name)
						continue
					}
					used[family] = true
					metrics = append(metrics, family)
				}
				// Label names: in by (...), in {...} selectors, in the legend.
				var labels []string
				for _, m := range labelRE.FindAllStringSubmatch(q.Expr, -1) {
					for _, part := range strings.Split(m[1]+","+m[2], ",") {
						if i := strings.IndexAny(part, "=!~"); i >= 0 {
							part = part[:i]
						}
						labels = append(labels, strings.TrimSpace(part))
					}
				}
				for _, m := range regexp.MustCompile(`\{\{(\w+)\}\}`).FindAllStringSubmatch(q.LegendFormat, -1) {
					labels = append(labels, m[1])
				}
				for _, label := range labels {
					// job and instance are Prometheus's own, added to
					// every series it scrapes.
					if label == "" || label == "le" || label == "job" || label == "instance" {
						continue
					}
					found := false
					for _, f := range metrics {
						found = found || slices.Contains(families[f], label)
					}
					if !found {
						t.Errorf("panel %q uses the label %s, which none of %v has", p.Title, label, metrics)
					}
				}
			}
		}
		for f := range families {
			if strings.HasPrefix(f, "retries_") && !used[f] {
				t.Errorf("the module exports %s, which no panel shows", f)
			}
		}
	})
}

// TestDashboardVariables: the dashboard has job and instance variables,
// and every series a query selects is filtered by both, so that two
// feeders scraped by one Prometheus can be told apart (they drew
// identical lines before).
func TestDashboardVariables(t *testing.T) {
	t.Parallel()
	var d struct {
		Templating struct{ List []struct{ Name string } }
		Panels     []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range d.Templating.List {
		names = append(names, v.Name)
	}
	if !slices.Contains(names, "job") || !slices.Contains(names, "instance") {
		t.Errorf("the variables are %v, want job and instance among them", names)
	}
	selector := regexp.MustCompile(`\bretries_[a-z0-9_]+(\{[^}]*\})?`)
	labels := regexp.MustCompile(`by \([^)]*\)|\{[^}]*\}`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			spans := labels.FindAllStringIndex(tg.Expr, -1)
			for _, m := range selector.FindAllStringSubmatchIndex(tg.Expr, -1) {
				inLabels := false
				for _, s := range spans {
					inLabels = inLabels || s[0] <= m[0] && m[0] < s[1]
				}
				if inLabels {
					continue
				}
				sel := ""
				if m[2] >= 0 {
					sel = tg.Expr[m[2]:m[3]]
				}
				if !strings.Contains(sel, `job=~"$job"`) || !strings.Contains(sel, `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by $job and $instance", p.Title, tg.Expr[m[0]:m[1]])
				}
			}
		}
	}
}
