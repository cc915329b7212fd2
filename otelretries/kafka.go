package otelretries

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// PartitionKey is the attribute that names a Kafka partition, by number,
// in retries.kafka.lag.
const PartitionKey = attribute.Key("retries.partition")

// KafkaStats is what RegisterKafka reports of a member of the kafka module
// (github.com/seed32e55400/retries/kafka), whose Member.Stats returns a
// kafka.Stats of the same fields, so that KafkaStats(m.Stats()) converts
// it: this module does not depend on the Kafka client.
type KafkaStats struct {
	Fed          int64 // records acknowledged by Vespa
	DeadLettered int64 // records produced to the dead letters' topic or written to its file
	Commits      int64 // successful commits
	// Lag is the lag of each of the member's partitions, by number: its
	// records not committed, to its end as of its last fetch.
	Lag map[int32]int64
}

// RegisterKafka reports what stats returns, at each collection, as
// observable instruments named by name, as RegisterLimiter does:
//   - retries.kafka.fed and retries.kafka.deadlettered (counters,
//     {record}): records acknowledged, and records dead-lettered;
//   - retries.kafka.commits (counter, {commit});
//   - retries.kafka.lag (gauge, {record}): each partition's lag, with
//     PartitionKey; a partition the member no longer holds is not
//     reported.
//
// For a member m of the kafka module:
//
//	otelretries.RegisterKafka("orders", func() otelretries.KafkaStats { return otelretries.KafkaStats(m.Stats()) })
//	otelretries.RegisterFeed("orders", m.Feed())
func RegisterKafka(name string, stats func() KafkaStats, opts ...Option) (metric.Registration, error) {
	m := meterOf(opts)
	ins := observables{m: m}
	fed := ins.counter("retries.kafka.fed", "{record}", "Records of a Kafka member acknowledged by Vespa.")
	dead := ins.counter("retries.kafka.deadlettered", "{record}", "Records of a Kafka member dead-lettered.")
	commits := ins.counter("retries.kafka.commits", "{commit}", "Commits of a Kafka member.")
	lag := ins.gauge("retries.kafka.lag", "{record}", "Records of a Kafka member's partition not committed, to its end as of its last fetch.")
	if ins.err != nil {
		return nil, ins.err
	}
	named := NameKey.String(name)
	attrs := metric.WithAttributes(named)
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(fed, s.Fed, attrs)
		o.ObserveInt64(dead, s.DeadLettered, attrs)
		o.ObserveInt64(commits, s.Commits, attrs)
		for p, n := range s.Lag {
			o.ObserveInt64(lag, n, metric.WithAttributes(named, PartitionKey.Int(int(p))))
		}
		return nil
	}, fed, dead, commits, lag)
}
