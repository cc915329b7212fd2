// Package otelretries turns the events of [retries] policies into OpenTelemetry
// metrics and traces, and reports the state of their shared objects (a
// [retries.Budget], [retries.Limiter] or [retries.Breaker]) as observable
// gauges. It is a module of its own, so that the retries package keeps its
// single dependency.
//
// Attach the observer to a policy, named for the attributes:
//
//	obs, err := otelretries.NewObserver()
//	p := retries.DocV1.Copy(retries.WithObserver(obs))
//
// Every call of p then counts in the metrics below, and runs in a span of
// its own, with an event for each retry.
//
// Metrics, every one with the meter named "github.com/seed32e55400/retries":
//   - retries.calls (counter, {call}): calls ended, by retries.policy,
//     retries.outcome (success, failure, gave_up, budget_refused,
//     breaker_open, context_done) and, for a call that returned an HTTP
//     response, retries.status_class (2xx, 4xx, 5xx, …): success says only
//     that the policy did not retry the last outcome, which may be a 503;
//   - retries.call.duration (histogram, s): the time of each call, its
//     retries and waits included, by the same attributes;
//   - retries.attempt.duration (histogram, s): the time each attempt ran,
//     by retries.policy;
//   - retries.limiter.queued (histogram, s): the time an attempt waited for
//     a permit of the policy's adaptive limiter, for the attempts that
//     waited, by retries.policy (a Retry-After the limiter holds every
//     attempt for shows here, not in retries.retry.delay);
//   - retries.call.attempts (histogram, {attempt}): attempts per call,
//     those that failed during an outage included, by retries.policy;
//   - retries.retry.delay (histogram, s): the wait before each retry, by
//     retries.policy;
//   - retries.refusals (counter, {refusal}): retries or attempts refused by
//     a budget or a breaker, by retries.policy and retries.refusal (budget,
//     breaker);
//   - retries.hold.duration (histogram, s): the time a breaker held an
//     attempt back while its server was away, by retries.policy;
//   - with [RegisterLimiter], [RegisterBreaker] and [RegisterBudget], gauges
//     read from the objects' Stats when the metrics are collected;
//   - with [RegisterFeed], a feed.Client's operations by result, its
//     requests, responses and pauses.
//
// Attribute values are bounded: the policy's name, an outcome, a refusal,
// a status class, an error's type. No URL, id or error message is ever an attribute.
//
// Traces: a span per call named "retries " + the policy's name, of kind
// internal, with attributes retries.policy, retries.outcome,
// retries.attempts and retries.outage_attempts (as RetryError counts them:
// the attempts that failed during an outage in the second only), an event
// "retry" per retry (retries.attempt: the attempts made so far, all
// counted,
// retries.wait in seconds, error.type or http.response.status_code), and
// an event "held" when a breaker held the call back. The attempts themselves are the
// spans of what the call does: with net/http under otelhttp, one client
// span per attempt, which are the call span's children. A span per attempt
// on top of those (as gRPC's A45 has it) would double them and tell nothing
// more, so the attempts are events.
//
// The observer's functions run on the calling goroutine. Metrics aggregate
// in memory; spans go to the tracer provider's span processors, so give it
// a batching one (sdktrace.WithBatcher), which drops spans rather than
// block, and not a synchronous one, outside tests.
package otelretries

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/seed32e55400/retries"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/seed32e55400/retries"

// Attribute keys.
const (
	PolicyKey   = attribute.Key("retries.policy")
	OutcomeKey  = attribute.Key("retries.outcome")
	RefusalKey  = attribute.Key("retries.refusal")
	AttemptKey  = attribute.Key("retries.attempt")
	AttemptsKey = attribute.Key("retries.attempts")
	// OutageAttemptsKey counts a call's attempts that failed during an
	// outage, which retries.attempts leaves out.
	OutageAttemptsKey = attribute.Key("retries.outage_attempts")
	WaitKey           = attribute.Key("retries.wait")
	ErrorKey          = attribute.Key("error.type")
	StatusKey         = attribute.Key("http.response.status_code")
	// StatusClassKey is the class ("2xx", "4xx", "5xx", …) of the HTTP
	// response a call returned (through a retries.Transport), on
	// retries.calls and retries.call.duration: outcome success says the
	// policy did not retry the call's last outcome, which may be a 503 it
	// does not retry or gave up on, and this says what the server answered.
	StatusClassKey = attribute.Key("retries.status_class")
)

// Option configures [NewObserver].
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	noTrace bool
}

// WithMeterProvider sets the meter provider; the default is the global one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the tracer provider; the default is the global
// one.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithoutSpans makes the observer record metrics only.
func WithoutSpans() Option { return func(c *config) { c.noTrace = true } }

// instruments are the observer's metrics.
type instruments struct {
	calls, refusals           metric.Int64Counter
	attempts                  metric.Int64Histogram
	delay, hold               metric.Float64Histogram
	duration, attempt, queued metric.Float64Histogram
}

// durationBounds are the bounds of the duration histograms, in seconds:
// from a loopback request to a call that waited out an outage.
var durationBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// NewObserver returns a [retries.Observer] that records the metrics and
// spans the package documentation lists. It fails only if an instrument
// cannot be created.
func NewObserver(opts ...Option) (*retries.Observer, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	var in instruments
	var err error
	if in.calls, err = m.Int64Counter("retries.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls of a retry policy that have ended, by outcome.")); err != nil {
		return nil, err
	}
	if in.refusals, err = m.Int64Counter("retries.refusals", metric.WithUnit("{refusal}"),
		metric.WithDescription("Retries or attempts refused by a retry budget or a circuit breaker.")); err != nil {
		return nil, err
	}
	if in.attempts, err = m.Int64Histogram("retries.call.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts per call of a retry policy, those during an outage included."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 7, 10, 20, 50, 100)); err != nil {
		return nil, err
	}
	if in.delay, err = m.Float64Histogram("retries.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("The wait before a retry."),
		metric.WithExplicitBucketBoundaries(0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)); err != nil {
		return nil, err
	}
	if in.hold, err = m.Float64Histogram("retries.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("The time a circuit breaker held an attempt back while its server was away."),
		metric.WithExplicitBucketBoundaries(0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)); err != nil {
		return nil, err
	}
	if in.duration, err = m.Float64Histogram("retries.call.duration", metric.WithUnit("s"),
		metric.WithDescription("The time a call of a retry policy took, its retries and waits included."),
		metric.WithExplicitBucketBoundaries(durationBounds...)); err != nil {
		return nil, err
	}
	if in.attempt, err = m.Float64Histogram("retries.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("The time one attempt ran, waits before it left out."),
		metric.WithExplicitBucketBoundaries(durationBounds...)); err != nil {
		return nil, err
	}
	if in.queued, err = m.Float64Histogram("retries.limiter.queued", metric.WithUnit("s"),
		metric.WithDescription("The time an attempt waited for a permit of the adaptive limiter, for those that waited."),
		metric.WithExplicitBucketBoundaries(durationBounds...)); err != nil {
		return nil, err
	}
	var tracer trace.Tracer
	if !c.noTrace {
		tracer = c.tp.Tracer(ScopeName)
	}
	return newObserver(&in, tracer), nil
}

func newObserver(in *instruments, tracer trace.Tracer) *retries.Observer {
	o := &retries.Observer{
		Attempt: func(ctx context.Context, a retries.AttemptInfo) {
			policy := metric.WithAttributes(PolicyKey.String(a.Policy))
			in.attempt.Record(ctx, a.Elapsed.Seconds(), policy)
			if a.Queued > 0 {
				in.queued.Record(ctx, a.Queued.Seconds(), policy)
			}
		},
		Wait: func(ctx context.Context, c retries.CallInfo, s retries.State) {
			in.delay.Record(ctx, s.Wait.Seconds(), metric.WithAttributes(PolicyKey.String(c.Policy)))
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				attrs := []attribute.KeyValue{AttemptKey.Int(s.Attempt + s.OutageAttempts), WaitKey.Float64(s.Wait.Seconds())}
				if s.Err != nil {
					attrs = append(attrs, ErrorKey.String(errorType(s.Err)))
				}
				if resp, ok := s.Value.(*http.Response); ok && resp != nil {
					attrs = append(attrs, StatusKey.Int(resp.StatusCode))
				}
				span.AddEvent("retry", trace.WithAttributes(attrs...))
			}
		},
		Hold: func(ctx context.Context, c retries.CallInfo, reason error, d time.Duration) {
			in.hold.Record(ctx, d.Seconds(), metric.WithAttributes(PolicyKey.String(c.Policy), RefusalKey.String(refusalOf(reason))))
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent("held", trace.WithAttributes(RefusalKey.String(refusalOf(reason)), WaitKey.Float64(d.Seconds())))
			}
		},
		Refuse: func(ctx context.Context, c retries.CallInfo, reason error) {
			in.refusals.Add(ctx, 1, metric.WithAttributes(PolicyKey.String(c.Policy), RefusalKey.String(refusalOf(reason))))
		},
		Done: func(ctx context.Context, d retries.CallDone) {
			policy := PolicyKey.String(d.Policy)
			outcome := OutcomeKey.String(d.Outcome.String())
			attrs := metric.WithAttributes(policy, outcome)
			if resp, ok := d.Value.(*http.Response); ok && resp != nil {
				attrs = metric.WithAttributes(policy, outcome, StatusClassKey.String(statusClass(resp.StatusCode)))
			}
			in.calls.Add(ctx, 1, attrs)
			in.duration.Record(ctx, d.Elapsed.Seconds(), attrs)
			in.attempts.Record(ctx, int64(d.Attempts+d.OutageAttempts), metric.WithAttributes(policy))
			if tracer == nil {
				return
			}
			span := trace.SpanFromContext(ctx)
			span.SetAttributes(outcome, AttemptsKey.Int(d.Attempts), OutageAttemptsKey.Int(d.OutageAttempts))
			if d.Outcome != retries.OutcomeSuccess && d.Err != nil {
				span.SetStatus(codes.Error, d.Outcome.String())
				span.SetAttributes(ErrorKey.String(errorType(d.Err)))
			}
			span.End()
		},
	}
	if tracer == nil {
		return o
	}
	o.Start = func(ctx context.Context, c retries.CallInfo) context.Context {
		name := "retries"
		if c.Policy != "" {
			name += " " + c.Policy
		}
		ctx, _ = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(PolicyKey.String(c.Policy)))
		return ctx
	}
	return o
}

// statusClass is an HTTP status's class: "2xx", "5xx", …
func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return string(rune('0'+code/100)) + "xx"
}

func refusalOf(reason error) string {
	switch reason {
	case retries.ErrBudgetExhausted:
		return "budget"
	case retries.ErrBreakerOpen:
		return "breaker"
	}
	return "other"
}

// errorType is the Go type of err, as OpenTelemetry's error.type suggests
// when there is no better code: a bounded set, unlike messages. A status
// error is its status code.
func errorType(err error) string {
	if se, ok := err.(*retries.StatusError); ok {
		return fmt.Sprint(se.StatusCode)
	}
	return reflect.TypeOf(err).String()
}
