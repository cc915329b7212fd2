package otelretries_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/otelretries"
)

// This example serves the metrics for Prometheus to scrape, which the
// dashboard in dashboard/ reads: the OpenTelemetry Prometheus exporter on
// a registry of its own, served by promhttp at /metrics (here on a test
// server, scraped once).
func ExampleNewObserver_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		panic(err)
	}
	mp := otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)))
	obs, err := otelretries.NewObserver(mp, otelretries.WithoutSpans())
	if err != nil {
		panic(err)
	}
	budget := retries.NewBudget(0.1, 5)
	if _, err := otelretries.RegisterBudget("feed", budget, mp); err != nil {
		panic(err)
	}
	p := retries.DocV1.Copy(retries.WithObserver(obs), retries.WithBudget(budget))
	_ = p.Do(context.Background(), func(context.Context) error { return nil })

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // in a program: http.Handle("/metrics", …)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "retries_calls_total{") {
			fmt.Println(strings.Contains(line, `policy="DocV1"`), strings.Contains(line, `outcome="success"`))
		}
	}
	// Output:
	// true true
}
