package otelretries

import (
	"context"

	"github.com/seed32e55400/retries/visit"
	"go.opentelemetry.io/otel/metric"
)

// RegisterVisit reports c's counts ([visit.Client.Stats]) as observable
// instruments named by name, as RegisterLimiter does:
//   - retries.visit.documents (counter, {document}): documents handed out;
//   - retries.visit.dropped (counter, {document}): documents read again
//     after a cut or a resume, and dropped;
//   - retries.visit.requests (counter, {request}), and of them
//     retries.visit.throttled (429s), retries.visit.cut (a stream or a page
//     cut short) and retries.visit.failed;
//   - retries.visit.inflight and retries.visit.limit (gauges, {request}):
//     the requests in flight, and the visits the client lets in flight at
//     once, learned from the server's 429s.
func RegisterVisit(name string, c *visit.Client, opts ...Option) (metric.Registration, error) {
	m := meterOf(opts)
	ins := observables{m: m}
	counter := ins.counter
	gauge := func(name, desc string) metric.Int64ObservableGauge { return ins.gauge(name, "{request}", desc) }
	documents := counter("retries.visit.documents", "{document}", "Documents a visit handed out.")
	dropped := counter("retries.visit.dropped", "{document}", "Documents a visit read again after a cut or a resume, and dropped.")
	requests := counter("retries.visit.requests", "{request}", "Requests a visit sent.")
	throttled := counter("retries.visit.throttled", "{request}", "Requests of a visit answered 429.")
	cut := counter("retries.visit.cut", "{request}", "Requests of a visit whose stream or page was cut short.")
	failed := counter("retries.visit.failed", "{request}", "Requests of a visit that failed otherwise.")
	inflight := gauge("retries.visit.inflight", "Requests of a visit in flight.")
	limit := gauge("retries.visit.limit", "The visits a client lets in flight at once, learned from the server's 429s.")
	if ins.err != nil {
		return nil, ins.err
	}
	attrs := metric.WithAttributes(NameKey.String(name))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(documents, s.Documents, attrs)
		o.ObserveInt64(dropped, s.Dropped, attrs)
		o.ObserveInt64(requests, s.Requests, attrs)
		o.ObserveInt64(throttled, s.Throttled, attrs)
		o.ObserveInt64(cut, s.Cut, attrs)
		o.ObserveInt64(failed, s.Failed, attrs)
		o.ObserveInt64(inflight, s.InFlight, attrs)
		o.ObserveInt64(limit, s.Limit, attrs)
		return nil
	}, documents, dropped, requests, throttled, cut, failed, inflight, limit)
}
