package otelretries

import (
	"context"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/query"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ReasonKey is the attribute of retries.query.degraded that names why a
// result's coverage is partial: "timeout", "adaptive-timeout",
// "match-phase" or "non-ideal-state".
const ReasonKey = attribute.Key("retries.reason")

// RegisterQuery reports c's counts ([query.Client.Stats]) as observable
// counters named by name, as RegisterLimiter does:
//   - retries.query.queries ({query}): queries sent, and of them
//     retries.query.results (answered with a result), retries.query.incomplete
//     (a result with errors or a partial coverage) and retries.query.failed;
//   - retries.query.degraded ({query}), by ReasonKey: results whose coverage
//     is partial, by each reason it gives;
//   - retries.query.requests ({request}): requests sent, retries and hedges
//     included; retries.query.retries, retries.query.hedges,
//     retries.query.hedges.won and retries.query.hedges.refused (by the
//     budget);
//   - retries.query.endpoints.down (gauge, {endpoint}): endpoints whose
//     breaker is open (see package query), out of
//     retries.query.endpoints (gauge).
//
// A query's duration is the observer's: give query.Config.Calls an
// observer of NewObserver, and retries.call.duration has it under the
// policy Query.
func RegisterQuery(name string, c *query.Client, opts ...Option) (metric.Registration, error) {
	m := meterOf(opts)
	ins := observables{m: m}
	counter := ins.counter
	queries := counter("retries.query.queries", "{query}", "Queries a query client sent.")
	results := counter("retries.query.results", "{query}", "Queries answered with a result (a 200), errors or partial coverage included.")
	incomplete := counter("retries.query.incomplete", "{query}", "Results with errors or a partial coverage.")
	failed := counter("retries.query.failed", "{query}", "Queries that ended without a result.")
	degraded := counter("retries.query.degraded", "{query}", "Results whose coverage is partial, by each reason it gives.")
	requests := counter("retries.query.requests", "{request}", "Requests a query client sent, retries and hedges included.")
	retried := counter("retries.query.retries", "{request}", "Requests a query client sent again after an answer or an error.")
	hedges := counter("retries.query.hedges", "{request}", "Hedges a query client sent.")
	won := counter("retries.query.hedges.won", "{request}", "Hedges whose answer was taken.")
	refused := counter("retries.query.hedges.refused", "{request}", "Hedges the retry budget refused.")
	endpoints := ins.gauge("retries.query.endpoints", "{endpoint}", "The endpoints of a query client.")
	down := ins.gauge("retries.query.endpoints.down", "{endpoint}", "Endpoints of a query client whose circuit breaker is open.")
	if ins.err != nil {
		return nil, ins.err
	}
	named := NameKey.String(name)
	attrs := metric.WithAttributes(named)
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(queries, s.Queries, attrs)
		o.ObserveInt64(results, s.Results, attrs)
		o.ObserveInt64(incomplete, s.Incomplete, attrs)
		o.ObserveInt64(failed, s.Failed, attrs)
		for reason, n := range s.Degraded {
			o.ObserveInt64(degraded, n, metric.WithAttributes(named, ReasonKey.String(reason)))
		}
		o.ObserveInt64(requests, s.Requests, attrs)
		o.ObserveInt64(retried, s.Retries, attrs)
		o.ObserveInt64(hedges, s.Hedges, attrs)
		o.ObserveInt64(won, s.HedgesWon, attrs)
		o.ObserveInt64(refused, s.Refused, attrs)
		n := int64(0)
		for _, e := range s.Endpoints {
			if e.Breaker.State != retries.BreakerClosed {
				n++
			}
		}
		o.ObserveInt64(endpoints, int64(len(s.Endpoints)), attrs)
		o.ObserveInt64(down, n, attrs)
		return nil
	}, queries, results, incomplete, failed, degraded, requests, retried, hedges, won, refused, endpoints, down)
}
