package otelretries_test

import (
	"sync"
	"testing"

	"github.com/seed32e55400/retries/otelretries"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestKafkaMetrics: each collection reports what the stats function
// returns then, the lag by partition, and no more the lag of a partition
// the member has let go.
func TestKafkaMetrics(t *testing.T) {
	var mu sync.Mutex
	s := otelretries.KafkaStats{Fed: 120, DeadLettered: 3, Commits: 7, Lag: map[int32]int64{0: 40, 5: 2}}
	reader := sdkmetric.NewManualReader()
	stats := func() otelretries.KafkaStats { mu.Lock(); defer mu.Unlock(); return s }
	if _, err := otelretries.RegisterKafka("orders", stats, otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		t.Fatal(err)
	}
	name := otelretries.NameKey.String("orders")
	lagOf := func(m map[string]metricdata.Aggregation) map[int64]int64 {
		g, ok := m["retries.kafka.lag"].(metricdata.Gauge[int64])
		if !ok {
			t.Fatalf("retries.kafka.lag is %T, want an int64 gauge", m["retries.kafka.lag"])
		}
		out := map[int64]int64{}
		for _, p := range g.DataPoints {
			v, _ := p.Attributes.Value(otelretries.PartitionKey)
			if n, _ := p.Attributes.Value(otelretries.NameKey); n != attribute.StringValue("orders") {
				t.Errorf("lag of partition %d named %v, want orders", v.AsInt64(), n.AsString())
			}
			out[v.AsInt64()] = p.Value
		}
		return out
	}
	m := collect(t, reader)
	for metric, want := range map[string]int64{"retries.kafka.fed": 120, "retries.kafka.deadlettered": 3, "retries.kafka.commits": 7} {
		if got := sumOf(t, m[metric], name); got != want {
			t.Errorf("%s = %d, want %d", metric, got, want)
		}
	}
	if got := lagOf(m); len(got) != 2 || got[0] != 40 || got[5] != 2 {
		t.Errorf("lag by partition = %v, want 0: 40, 5: 2", got)
	}
	mu.Lock()
	s = otelretries.KafkaStats{Fed: 150, DeadLettered: 3, Commits: 8, Lag: map[int32]int64{5: 0}}
	mu.Unlock()
	m = collect(t, reader)
	if got := sumOf(t, m["retries.kafka.fed"], name); got != 150 {
		t.Errorf("retries.kafka.fed = %d after more were fed, want 150", got)
	}
	if got := lagOf(m); len(got) != 1 || got[5] != 0 {
		t.Errorf("lag by partition = %v after partition 0 went, want only 5: 0", got)
	}
}
