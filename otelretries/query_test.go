package otelretries_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/seed32e55400/retries/otelretries"
	"github.com/seed32e55400/retries/query"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestQueryMetrics: after three queries (a whole result, one whose
// coverage a timeout cut, and an illegal one), the instruments count
// three queries, two results, one incomplete, one failed, one degraded by
// a timeout and none by another reason, a request each, and its one
// endpoint up; a client whose endpoint refuses connections has it down.
func TestQueryMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("case") {
		case "degraded":
			fmt.Fprint(w, `{"root":{"fields":{"totalCount":0},"coverage":{"coverage":50,"full":false,"degraded":{"timeout":true}}}}`)
		case "illegal":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"root":{"errors":[{"code":3,"summary":"Illegal query"}]}}`)
		default:
			fmt.Fprint(w, `{"root":{"fields":{"totalCount":1},"coverage":{"coverage":100,"full":true},"children":[{"id":"a"}]}}`)
		}
	}))
	defer srv.Close()
	c, err := query.New(query.Config{URLs: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	if _, err := otelretries.RegisterQuery("search", c, otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ok", "degraded", "illegal"} {
		_, _ = c.Search(t.Context(), query.Query{Params: url.Values{"case": {kind}}})
	}
	m := collect(t, reader)
	name := otelretries.NameKey.String("search")
	for metric, want := range map[string]int64{"retries.query.queries": 3, "retries.query.results": 2, "retries.query.incomplete": 1,
		"retries.query.failed": 1, "retries.query.requests": 3, "retries.query.retries": 0, "retries.query.hedges": 0, "retries.query.hedges.won": 0, "retries.query.hedges.refused": 0} {
		if got := sumOf(t, m[metric], name); got != want {
			t.Errorf("%s = %d, want %d", metric, got, want)
		}
	}
	if got := sumOf(t, m["retries.query.degraded"], name, otelretries.ReasonKey.String("timeout")); got != 1 {
		t.Errorf("retries.query.degraded{timeout} = %d, want 1", got)
	}
	if got := sumOf(t, m["retries.query.degraded"], name, otelretries.ReasonKey.String("match-phase")); got != 0 {
		t.Errorf("retries.query.degraded{match-phase} = %d, want 0", got)
	}
	if all, down := gaugeOf(t, m["retries.query.endpoints"], name), gaugeOf(t, m["retries.query.endpoints.down"], name); all != 1 || down != 0 {
		t.Errorf("endpoints %d, down %d: want 1 and 0", all, down)
	}

	// An endpoint where nothing listens: its breaker opens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d, err := query.New(query.Config{URLs: []string{dead}})
	if err != nil {
		t.Fatal(err)
	}
	reader = sdkmetric.NewManualReader()
	if _, err := otelretries.RegisterQuery("dead", d, otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, _ = d.Search(t.Context(), query.Query{Params: url.Values{"yql": {"x"}}})
	}
	m = collect(t, reader)
	if got := gaugeOf(t, m["retries.query.endpoints.down"], otelretries.NameKey.String("dead")); got != 1 {
		t.Errorf("retries.query.endpoints.down = %d for a client of a dead endpoint, want 1", got)
	}
}

// gaugeOf returns the value of the int64 gauge a with attrs, or 0.
func gaugeOf(t *testing.T, a metricdata.Aggregation, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	g, ok := a.(metricdata.Gauge[int64])
	if !ok {
		t.Fatalf("%T is not an int64 gauge", a)
	}
	return pointOf(g.DataPoints, attrs...)
}
