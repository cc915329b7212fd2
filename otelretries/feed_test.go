package otelretries_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/otelretries"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestFeedMetrics: a client that sent three puts, each acknowledged after
// a 503 retried, and one the server refused with a 400, reports them by
// result and by response.
func TestFeedMetrics(t *testing.T) {
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/bad"):
			return http.StatusBadRequest
		case n == 0: // the first request of each document
			return http.StatusServiceUnavailable
		}
		return 0
	})
	c, err := feed.New(feed.Config{URL: srv.URL, Progress: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := sdkmetric.NewManualReader()
	if _, err := otelretries.RegisterFeed("docs", c, otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "bad"} {
		_, _ = c.Put(context.Background(), "id:music:music::"+id, json.RawMessage(`{"n":1}`))
	}
	m := collect(t, reader)
	name := otelretries.NameKey.String("docs")
	for result, want := range map[string]int64{"acknowledged": 3, "failed": 1, "unknown": 0, "held_back": 0, "condition_not_met": 0, "not_found": 0} {
		if got := sumOf(t, m["retries.feed.operations"], name, otelretries.ResultKey.String(result)); got != want {
			t.Errorf("retries.feed.operations{%s} = %d, want %d", result, got, want)
		}
	}
	for metric, want := range map[string]int64{"retries.feed.requests": 7, "retries.feed.retries": 3, "retries.feed.unavailable": 3,
		"retries.feed.throttled": 0, "retries.feed.no_response": 0, "retries.feed.pauses": 0} {
		if got := sumOf(t, m[metric], name); got != want {
			t.Errorf("%s = %d, want %d", metric, got, want)
		}
	}
}
