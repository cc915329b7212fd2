package otelretries

import (
	"context"

	"github.com/seed32e55400/retries/feed"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ResultKey is the attribute of retries.feed.operations that says how an
// operation ended.
const ResultKey = attribute.Key("retries.result")

// RegisterFeed reports c's counts ([feed.Client.Stats]) as observable
// instruments named by name, as RegisterLimiter does:
//   - retries.feed.operations (counter, {operation}): operations ended,
//     by retries.result: acknowledged (a 2xx), condition_not_met (a 412),
//     not_found (a 404 to a remove), failed, unknown (not safe to repeat,
//     and may have been applied) and held_back (not sent behind a failed
//     operation on the document); the results are disjoint, so their sum
//     is every operation ended;
//   - retries.feed.requests (counter, {request}) and retries.feed.retries
//     (counter, {request}): requests sent, and those beyond an operation's
//     first;
//   - retries.feed.throttled, retries.feed.unavailable and
//     retries.feed.no_response (counters, {response}): 429s, 503s, and
//     requests that got no response;
//   - retries.feed.inflight (gauge, {request}): requests on the wire;
//   - retries.feed.paused (counter, s) and retries.feed.pauses (counter,
//     {pause}): the time the feed was paused by outages, and the outages;
//     retries.feed.paused_now (gauge, 1 while paused).
func RegisterFeed(name string, c *feed.Client, opts ...Option) (metric.Registration, error) {
	m := meterOf(opts)
	ins := observables{m: m}
	counter := ins.counter
	ops := counter("retries.feed.operations", "{operation}", "Operations of a feed that have ended, by result.")
	requests := counter("retries.feed.requests", "{request}", "Requests a feed sent, retries included.")
	retried := counter("retries.feed.retries", "{request}", "Requests beyond the first of each operation.")
	throttled := counter("retries.feed.throttled", "{response}", "429 responses to a feed.")
	unavailable := counter("retries.feed.unavailable", "{response}", "503 responses to a feed.")
	none := counter("retries.feed.no_response", "{request}", "Requests of a feed that got no response.")
	pauses := counter("retries.feed.pauses", "{pause}", "Outages that paused a feed.")
	inflight := ins.gauge("retries.feed.inflight", "{request}", "Requests of a feed on the wire.")
	pausedNow := ins.gauge("retries.feed.paused_now", "{pause}", "1 while a feed is paused by an outage, 0 otherwise.")
	paused := ins.floatCounter("retries.feed.paused", "s", "The time a feed was paused by outages.")
	if ins.err != nil {
		return nil, ins.err
	}
	named := NameKey.String(name)
	attrs := metric.WithAttributes(named)
	result := func(r string) metric.ObserveOption {
		return metric.WithAttributes(named, ResultKey.String(r))
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(ops, s.Acknowledged-s.ConditionNotMet-s.NotFound, result("acknowledged"))
		o.ObserveInt64(ops, s.ConditionNotMet, result("condition_not_met"))
		o.ObserveInt64(ops, s.NotFound, result("not_found"))
		o.ObserveInt64(ops, s.Failed-s.Unknown-s.HeldBack, result("failed"))
		o.ObserveInt64(ops, s.Unknown, result("unknown"))
		o.ObserveInt64(ops, s.HeldBack, result("held_back"))
		o.ObserveInt64(requests, s.Requests, attrs)
		o.ObserveInt64(retried, s.Retries, attrs)
		o.ObserveInt64(throttled, s.Throttled, attrs)
		o.ObserveInt64(unavailable, s.Unavailable, attrs)
		o.ObserveInt64(none, s.Exceptions, attrs)
		o.ObserveInt64(pauses, s.Pauses, attrs)
		o.ObserveFloat64(paused, s.Paused.Seconds(), attrs)
		o.ObserveInt64(inflight, s.InFlight, attrs)
		now := int64(0)
		if s.PausedNow {
			now = 1
		}
		o.ObserveInt64(pausedNow, now, attrs)
		return nil
	}, ops, requests, retried, throttled, unavailable, none, pauses, paused, inflight, pausedNow)
}
