package otelretries

import (
	"context"

	"github.com/seed32e55400/retries"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// NameKey is the attribute that names a shared object in its gauges.
const NameKey = attribute.Key("retries.name")

// meterOf returns the module's meter of the provider opts name (the
// global one by default): every instrument of the module is in its scope.
func meterOf(opts []Option) metric.Meter {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return c.mp.Meter(ScopeName)
}

// RegisterLimiter reports l's state as observable gauges, read from
// [retries.Limiter.Stats] at each collection and named by name (keep it
// fixed and few, such as an endpoint's role): retries.limiter.limit
// ({request}, the in-flight limit), retries.limiter.rate ({request}/s, 0
// with no rate limit), retries.limiter.inflight and retries.limiter.waiting
// ({request}), in the module's meter of the provider [WithMeterProvider]
// names (the global one by default). Unregister the returned registration
// to stop.
func RegisterLimiter(name string, l *retries.Limiter, opts ...Option) (metric.Registration, error) {
	meter := meterOf(opts)
	limit, err := meter.Float64ObservableGauge("retries.limiter.limit", metric.WithUnit("{request}"),
		metric.WithDescription("The adaptive limiter's limit on attempts in flight."))
	if err != nil {
		return nil, err
	}
	rate, err := meter.Float64ObservableGauge("retries.limiter.rate", metric.WithUnit("{request}/s"),
		metric.WithDescription("The adaptive limiter's limit on attempts per second; 0 for none."))
	if err != nil {
		return nil, err
	}
	inflight, err := meter.Int64ObservableGauge("retries.limiter.inflight", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts holding a permit of the adaptive limiter."))
	if err != nil {
		return nil, err
	}
	waiting, err := meter.Int64ObservableGauge("retries.limiter.waiting", metric.WithUnit("{request}"),
		metric.WithDescription("Calls waiting for a permit of the adaptive limiter."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(NameKey.String(name))
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveFloat64(limit, s.Limit, attrs)
		o.ObserveFloat64(rate, s.Rate, attrs)
		o.ObserveInt64(inflight, int64(s.InFlight), attrs)
		o.ObserveInt64(waiting, int64(s.Waiting), attrs)
		return nil
	}, limit, rate, inflight, waiting)
}

// RegisterBreaker reports b's state as the observable gauge
// retries.breaker.state (0 closed, 1 half-open, 2 open), and the times it
// opened as the observable counter retries.breaker.opened, named by name,
// as RegisterLimiter does.
func RegisterBreaker(name string, b *retries.Breaker, opts ...Option) (metric.Registration, error) {
	meter := meterOf(opts)
	state, err := meter.Int64ObservableGauge("retries.breaker.state", metric.WithUnit("{state}"),
		metric.WithDescription("The circuit breaker's state: 0 closed, 1 half-open, 2 open."))
	if err != nil {
		return nil, err
	}
	opened, err := meter.Int64ObservableCounter("retries.breaker.opened", metric.WithUnit("{open}"),
		metric.WithDescription("The times the circuit breaker opened."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(NameKey.String(name))
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := b.Stats()
		v := int64(0)
		switch s.State {
		case retries.BreakerHalfOpen:
			v = 1
		case retries.BreakerOpen:
			v = 2
		}
		o.ObserveInt64(state, v, attrs)
		o.ObserveInt64(opened, s.Opened, attrs)
		return nil
	}, state, opened)
}

// RegisterBudget reports the retries b would grant now as the observable
// gauge retries.budget.available ({retry}), named by name, as
// RegisterLimiter does.
func RegisterBudget(name string, b *retries.Budget, opts ...Option) (metric.Registration, error) {
	meter := meterOf(opts)
	available, err := meter.Int64ObservableGauge("retries.budget.available", metric.WithUnit("{retry}"),
		metric.WithDescription("The retries the retry budget would grant now."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(NameKey.String(name))
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(available, b.Stats().Available, attrs)
		return nil
	}, available)
}
