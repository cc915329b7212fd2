package otelretries_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/otelretries"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var errBoom = errors.New("boom")

// setup returns an observer recording into an in-memory metric reader and
// span recorder.
func setup(t *testing.T) (*retries.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder, *sdkmetric.MeterProvider, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := otelretries.NewObserver(otelretries.WithMeterProvider(mp), otelretries.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	return obs, reader, spans, mp, tp
}

// collect returns the metrics by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	return got
}

// sumOf returns the value of an Int64 sum's point with attrs.
func sumOf(t *testing.T, a metricdata.Aggregation, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := a.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%T is not an int64 sum", a)
	}
	return pointOf(s.DataPoints, attrs...)
}

// pointOf returns the value of the point with attrs, or 0.
func pointOf(points []metricdata.DataPoint[int64], attrs ...attribute.KeyValue) int64 {
	want := attribute.NewSet(attrs...)
	for _, p := range points {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	return 0
}

func TestCallThatRetriesTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader, spans, _, _ := setup(t)
		p := retries.Query.Copy(retries.WithWait(retries.WaitFixed(time.Second)), retries.WithObserver(obs))
		n := 0
		var attemptSpan trace.SpanContext
		err := p.Do(t.Context(), func(ctx context.Context) error {
			attemptSpan = trace.SpanContextFromContext(ctx)
			if n++; n <= 2 {
				return errBoom
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		m := collect(t, reader)
		if got := sumOf(t, m["retries.calls"], otelretries.PolicyKey.String("Query"), otelretries.OutcomeKey.String("success")); got != 1 {
			t.Errorf("retries.calls{Query, success} = %d, want 1", got)
		}
		attempts := m["retries.call.attempts"].(metricdata.Histogram[int64]).DataPoints
		if len(attempts) != 1 || attempts[0].Count != 1 || attempts[0].Sum != 3 {
			t.Errorf("retries.call.attempts = %+v, want one call of 3 attempts", attempts)
		}
		delay := m["retries.retry.delay"].(metricdata.Histogram[float64]).DataPoints
		if len(delay) != 1 || delay[0].Count != 2 || delay[0].Sum != 2 {
			t.Errorf("retries.retry.delay = %+v, want 2 waits of 1 s", delay)
		}
		ended := spans.Ended()
		if len(ended) != 1 {
			t.Fatalf("%d spans, want 1", len(ended))
		}
		s := ended[0]
		if s.Name() != "retries Query" || s.SpanContext().SpanID() != attemptSpan.SpanID() {
			t.Errorf("span %q (%v), attempts ran under %v; want \"retries Query\", the attempts under it", s.Name(), s.SpanContext().SpanID(), attemptSpan.SpanID())
		}
		if len(s.Events()) != 2 || s.Events()[0].Name != "retry" {
			t.Fatalf("events %+v, want 2 retries", s.Events())
		}
		for i, e := range s.Events() {
			want := attribute.NewSet(otelretries.AttemptKey.Int(i+1), otelretries.WaitKey.Float64(1), otelretries.ErrorKey.String("*errors.errorString"))
			if got := attribute.NewSet(e.Attributes...); !got.Equals(&want) {
				t.Errorf("event %d: %v, want %v", i, got.Encoded(attribute.DefaultEncoder()), want.Encoded(attribute.DefaultEncoder()))
			}
		}
		if s.Status().Code == codes.Error {
			t.Errorf("status %v, want unset for a success", s.Status())
		}
		if d := s.EndTime().Sub(s.StartTime()); d != 2*time.Second {
			t.Errorf("span lasted %v, want 2s", d)
		}
	})
}

func TestBudgetRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader, spans, _, _ := setup(t)
		p := retries.Query.Copy(retries.WithBudget(retries.NewBudget(0, 0)), retries.WithObserver(obs))
		err := p.Do(t.Context(), func(context.Context) error { return errBoom })
		if !errors.Is(err, retries.ErrBudgetExhausted) {
			t.Fatalf("Do() = %v, want ErrBudgetExhausted", err)
		}
		m := collect(t, reader)
		if got := sumOf(t, m["retries.refusals"], otelretries.PolicyKey.String("Query"), otelretries.RefusalKey.String("budget")); got != 1 {
			t.Errorf("retries.refusals{Query, budget} = %d, want 1", got)
		}
		if got := sumOf(t, m["retries.calls"], otelretries.PolicyKey.String("Query"), otelretries.OutcomeKey.String("budget_refused")); got != 1 {
			t.Errorf("retries.calls{Query, budget_refused} = %d, want 1", got)
		}
		if s := spans.Ended(); len(s) != 1 || s[0].Status().Code != codes.Error {
			t.Errorf("spans %v, want one with an error status", s)
		}
	})
}

// TestThroughOtelhttp sends a request through DocV1 around an otelhttp
// transport to a real server that answers 503 once: the call's span has one
// client span per attempt as children, the second one marked as a resend by
// http.request.resend_count, and the metrics count one call of two attempts.
func TestThroughOtelhttp(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	obs, reader, spans, mp, tp := setup(t)
	base := otelhttp.NewTransport(otelretries.ResendCount(nil), otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))
	p := retries.DocV1.Copy(retries.WithWait(retries.WaitNone()), retries.WithObserver(obs))
	client := &http.Client{Transport: retries.NewTransport(base, p)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	var call sdktrace.ReadOnlySpan
	var clients []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			call = s
		case trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	if call == nil || call.Name() != "retries DocV1" {
		t.Fatalf("no call span among %v", spans.Ended())
	}
	if len(clients) != 2 {
		t.Fatalf("%d client spans, want one per attempt (2)", len(clients))
	}
	for i, c := range clients {
		if c.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("client span %q is not a child of the call's span", c.Name())
		}
		resend, has := int64(0), false
		for _, a := range c.Attributes() {
			if a.Key == otelretries.ResendKey {
				resend, has = a.Value.AsInt64(), true
			}
		}
		if i == 0 && has || i == 1 && (!has || resend != 1) {
			t.Errorf("client span %d: resend_count %d (set: %v), want none on the first and 1 on the second", i, resend, has)
		}
	}
	if ev := call.Events(); len(ev) != 1 {
		t.Errorf("call span events %v, want one retry", ev)
	} else if got, want := attribute.NewSet(ev[0].Attributes...), attribute.NewSet(otelretries.AttemptKey.Int(1), otelretries.WaitKey.Float64(0), otelretries.StatusKey.Int(503)); !got.Equals(&want) {
		t.Errorf("retry event %v, want attempt 1, wait 0, status 503", ev[0].Attributes)
	}
	m := collect(t, reader)
	if got := sumOf(t, m["retries.calls"], otelretries.PolicyKey.String("DocV1"), otelretries.OutcomeKey.String("success"),
		otelretries.StatusClassKey.String("2xx")); got != 1 {
		t.Errorf("retries.calls{DocV1, success, 2xx} = %d, want 1", got)
	}
}

// histogram returns the point of a float64 histogram with attrs.
func histogram(t *testing.T, a metricdata.Aggregation, attrs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := a.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%T is not a float64 histogram", a)
	}
	want := attribute.NewSet(attrs...)
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&want) {
			return p
		}
	}
	t.Fatalf("no point with %v among %d", attrs, len(h.DataPoints))
	return metricdata.HistogramDataPoint[float64]{}
}

// TestStatusClassOfAnAnswerNotRetried: Throttle does not retry a 503, so
// its call ends in success; the status class says the server answered
// 5xx, on the count and on the duration histogram alike.
func TestStatusClassOfAnAnswerNotRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	obs, reader, _, _, _ := setup(t)
	client := &http.Client{Transport: retries.NewTransport(nil, retries.Throttle.Copy(retries.WithObserver(obs)))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m := collect(t, reader)
	attrs := []attribute.KeyValue{otelretries.PolicyKey.String("Throttle"), otelretries.OutcomeKey.String("success"),
		otelretries.StatusClassKey.String("5xx")}
	if got := sumOf(t, m["retries.calls"], attrs...); got != 1 {
		t.Errorf("retries.calls{Throttle, success, 5xx} = %d, want 1", got)
	}
	h := histogram(t, m["retries.call.duration"], attrs...)
	if h.Count != 1 || h.Sum <= 0 || len(h.Bounds) != 16 || h.Bounds[0] != 0.001 || h.Bounds[15] != 300 {
		t.Errorf("retries.call.duration: count %d, sum %v, bounds %v; want one call, bounds from 1 ms to 300 s", h.Count, h.Sum, h.Bounds)
	}
}

// TestDurationsAndLimiterQueue: with a limiter of one permit, call A's
// attempt holds it for 2 s while call B waits for it. In fake time, B
// queued exactly 2 s, the attempts ran 2 s and 0 s, and the calls took
// 2 s each.
func TestDurationsAndLimiterQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader, _, _, _ := setup(t)
		l := retries.NewLimiter(retries.LimiterConfig{MaxInFlight: 1})
		p := retries.Throttle.Copy(retries.WithLimiter(l), retries.WithObserver(obs), retries.WithName("q"))
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { _ = p.Do(context.Background(), func(context.Context) error { <-release; return nil }) })
		synctest.Wait() // A holds the permit
		wg.Go(func() { _ = p.Do(context.Background(), func(context.Context) error { return nil }) })
		synctest.Wait() // B waits for it
		time.Sleep(2 * time.Second)
		close(release)
		wg.Wait()
		m := collect(t, reader)
		policy := otelretries.PolicyKey.String("q")
		if q := histogram(t, m["retries.limiter.queued"], policy); q.Count != 1 || q.Sum != 2 {
			t.Errorf("retries.limiter.queued: count %d, sum %v; want B's 2 s", q.Count, q.Sum)
		}
		if a := histogram(t, m["retries.attempt.duration"], policy); a.Count != 2 || a.Sum != 2 {
			t.Errorf("retries.attempt.duration: count %d, sum %v; want 2 attempts, 2 s in all", a.Count, a.Sum)
		}
		if c := histogram(t, m["retries.call.duration"], policy, otelretries.OutcomeKey.String("success")); c.Count != 2 || c.Sum != 4 {
			t.Errorf("retries.call.duration: count %d, sum %v; want 2 calls of 2 s", c.Count, c.Sum)
		}
	})
}

func TestGauges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := otelretries.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	l := retries.NewLimiter(retries.LimiterConfig{})
	b := retries.NewBreaker(retries.BreakerConfig{})
	budget := retries.NewBudget(0.1, 5)
	for _, reg := range []func() error{
		func() error { _, err := otelretries.RegisterLimiter("docs", l, mp); return err },
		func() error { _, err := otelretries.RegisterBreaker("docs", b, mp); return err },
		func() error { _, err := otelretries.RegisterBudget("docs", budget, mp); return err },
	} {
		if err := reg(); err != nil {
			t.Fatal(err)
		}
	}
	permit, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer permit.Release(retries.SignalSuccess)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelretries.ScopeName {
			t.Errorf("gauges in the scope %q, want the module's %q", sm.Scope.Name, otelretries.ScopeName)
		}
	}
	m := collect(t, reader)
	name := attribute.NewSet(otelretries.NameKey.String("docs"))
	gauge := func(metric string) float64 {
		switch g := m[metric].(type) {
		case metricdata.Gauge[int64]:
			for _, p := range g.DataPoints {
				if p.Attributes.Equals(&name) {
					return float64(p.Value)
				}
			}
		case metricdata.Gauge[float64]:
			for _, p := range g.DataPoints {
				if p.Attributes.Equals(&name) {
					return p.Value
				}
			}
		}
		t.Errorf("no %s gauge named docs", metric)
		return -1
	}
	if got := gauge("retries.limiter.inflight"); got != 1 {
		t.Errorf("retries.limiter.inflight = %v, want 1", got)
	}
	if got := gauge("retries.limiter.limit"); got != l.Stats().Limit {
		t.Errorf("retries.limiter.limit = %v, want %v", got, l.Stats().Limit)
	}
	if got := gauge("retries.breaker.state"); got != 0 {
		t.Errorf("retries.breaker.state = %v, want 0 (closed)", got)
	}
	if got := gauge("retries.budget.available"); got != 50 {
		t.Errorf("retries.budget.available = %v, want 50 (5/s over 10 s)", got)
	}
	// The state's unit is an annotation: a unit of "1" makes Prometheus
	// exporters name the gauge retries_breaker_state_ratio.
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "retries.breaker.state" && m.Unit != "{state}" {
				t.Errorf("retries.breaker.state has unit %q, want {state}", m.Unit)
			}
		}
	}
}

// TestHeldByBreaker checks what a call held back by an open breaker until
// its probe records: the hold's duration, and a "held" event.
func TestHeldByBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader, spans, _, _ := setup(t)
		b := retries.NewBreaker(retries.BreakerConfig{})
		p := retries.New(retries.WithName("inner"), retries.WithStop(retries.StopAfterAttempt(1)), retries.WithBreaker(b))
		for range 5 { // opens it at 0; its first probe is due at 50 ms
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			_ = p.Do(ctx, func(context.Context) error { return errBoom })
			cancel()
		}
		if err := p.Copy(retries.WithObserver(obs)).Do(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		hold := collect(t, reader)["retries.hold.duration"].(metricdata.Histogram[float64]).DataPoints
		if len(hold) != 1 || hold[0].Count != 1 || hold[0].Sum != 0.04 {
			t.Errorf("retries.hold.duration = %+v, want one hold of 40 ms", hold)
		}
		if s := spans.Ended(); len(s) != 1 || len(s[0].Events()) != 1 || s[0].Events()[0].Name != "held" {
			t.Errorf("spans %v, want one with a held event", s)
		}
	})
}

// TestAttemptsDuringOutage: during an outage the retry events number the
// attempts made so far, all counted, so none repeats; the span counts the
// attempts as RetryError does, those that failed during the outage apart,
// and the histogram all of them.
func TestAttemptsDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader, spans, _, _ := setup(t)
		b := retries.NewBreaker(retries.BreakerConfig{MaxProbeInterval: 100 * time.Millisecond})
		p := retries.New(retries.WithName("inner"), retries.WithWait(retries.WaitNone()), retries.WithStop(retries.StopAfterAttempt(100)),
			retries.WithBreaker(b), retries.WithObserver(obs))
		calls := 0
		err := p.Do(t.Context(), func(context.Context) error {
			if calls++; calls <= 8 { // 5 open the breaker, then 3 probes fail
				return &net.OpError{Op: "dial", Net: "tcp", Err: errBoom}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		s := spans.Ended()
		if len(s) != 1 {
			t.Fatalf("%d spans, want 1", len(s))
		}
		seen := map[int64]bool{}
		for _, ev := range s[0].Events() {
			for _, a := range ev.Attributes {
				if a.Key == otelretries.AttemptKey {
					if seen[a.Value.AsInt64()] {
						t.Errorf("retry event attempt %d repeats", a.Value.AsInt64())
					}
					seen[a.Value.AsInt64()] = true
				}
			}
		}
		attrs := attribute.NewSet(s[0].Attributes()...)
		attempts, _ := attrs.Value(otelretries.AttemptsKey)
		outage, _ := attrs.Value(otelretries.OutageAttemptsKey)
		if attempts.AsInt64()+outage.AsInt64() != int64(calls) || outage.AsInt64() == 0 {
			t.Errorf("span attempts %d + outage attempts %d, want %d in all, some during the outage", attempts.AsInt64(), outage.AsInt64(), calls)
		}
		h := collect(t, reader)["retries.call.attempts"].(metricdata.Histogram[int64]).DataPoints
		if len(h) != 1 || h[0].Sum != int64(calls) {
			t.Errorf("retries.call.attempts = %+v, want one call of %d attempts", h, calls)
		}
	})
}
