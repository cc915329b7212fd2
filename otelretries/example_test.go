package otelretries_test

import (
	"context"
	"fmt"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/otelretries"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// This example counts the calls of a policy by outcome. A program would
// give NewObserver its exporting meter and tracer providers, or set the
// global ones.
func ExampleNewObserver() {
	reader := sdkmetric.NewManualReader()
	obs, err := otelretries.NewObserver(otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		otelretries.WithoutSpans())
	if err != nil {
		panic(err)
	}
	p := retries.SyncRequest.Copy(retries.WithObserver(obs))
	_ = p.Do(context.Background(), func(context.Context) error { return nil })

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "retries.calls" {
			for _, dp := range sum.DataPoints {
				policy, _ := dp.Attributes.Value(otelretries.PolicyKey)
				outcome, _ := dp.Attributes.Value(otelretries.OutcomeKey)
				fmt.Println(m.Name, policy.AsString(), outcome.AsString(), dp.Value)
			}
		}
	}
	// Output:
	// retries.calls SyncRequest success 1
}

// This example reports a Kafka member's lag. A program converts its
// member's counts, kafka.Member.Stats, with KafkaStats(m.Stats()); here
// they are fixed.
func ExampleRegisterKafka() {
	reader := sdkmetric.NewManualReader()
	stats := func() otelretries.KafkaStats {
		return otelretries.KafkaStats{Fed: 900, Lag: map[int32]int64{3: 120}}
	}
	if _, err := otelretries.RegisterKafka("orders", stats,
		otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "retries.kafka.lag" {
			for _, dp := range g.DataPoints {
				p, _ := dp.Attributes.Value(otelretries.PartitionKey)
				fmt.Println(m.Name, "partition", p.AsInt64(), dp.Value)
			}
		}
	}
	// Output:
	// retries.kafka.lag partition 3 120
}
