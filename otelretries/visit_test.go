package otelretries_test

import (
	"testing"

	"github.com/seed32e55400/retries/otelretries"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestVisitMetrics: after a visit of 500 documents in pages, the
// instruments say 500 handed out, none dropped, and the server's requests.
func TestVisitMetrics(t *testing.T) {
	srv := visittest.New(t, 500, 16, nil)
	c, err := visit.New(visit.Config{URL: srv.URL, Cluster: "music", Slices: 2, WantedDocumentCount: 100, Pages: true})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	if _, err := otelretries.RegisterVisit("music", c, otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Visit(t.Context(), visit.Progress{}, func(visit.Page) error { return nil }); err != nil {
		t.Fatal(err)
	}
	m := collect(t, reader)
	name := otelretries.NameKey.String("music")
	for metric, want := range map[string]int64{"retries.visit.documents": 500, "retries.visit.dropped": 0,
		"retries.visit.requests": int64(srv.Requests()), "retries.visit.throttled": 0, "retries.visit.cut": 0, "retries.visit.failed": 0} {
		if got := sumOf(t, m[metric], name); got != want {
			t.Errorf("%s = %d, want %d", metric, got, want)
		}
	}
}
