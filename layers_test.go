package retries_test

import (
	"strings"
	"testing"

	"github.com/seed32e55400/retries"
)

// TestLayers: Layers puts the budget on the outer layer, the limiter and
// the breaker on the inner one with the outer one's predicate under
// RetryIfOutage, changes neither policy given, and leaves a nil object
// out, the policy's own kept.
func TestLayers(t *testing.T) {
	budget := retries.NewBudget(0.1, 5)
	outer, inner := retries.Layers(retries.DocV1, retries.Throttle, retries.NewLimiter(retries.LimiterConfig{}),
		retries.NewBreaker(retries.BreakerConfig{}), budget)
	if got := outer.String(); !strings.HasSuffix(got, "budget: NewBudget(0.1, 5)}") || strings.Contains(got, "breaker") || strings.Contains(got, "limiter") {
		t.Errorf("outer = %s, want DocV1 with the budget alone", got)
	}
	want := "retry: RetryAny(RetryIfStatus(429), RetryIfOutage(RetryAny(RetryIfAnyError(), RetryIfStatus(503))))"
	if got := inner.String(); !strings.Contains(got, want) || !strings.HasSuffix(got, "breaker, limiter}") || strings.Contains(got, "budget") {
		t.Errorf("inner = %s, want Throttle with the breaker, the limiter and %s", got, want)
	}
	if retries.DocV1.String() == outer.String() || retries.Throttle.String() == inner.String() {
		t.Error("Layers changed the policies it was given, or set nothing")
	}
	own := retries.NewBudget(0.2, 1)
	o, i := retries.Layers(retries.DocV1.Copy(retries.WithBudget(own)), retries.Throttle, nil, nil, nil)
	if !strings.Contains(o.String(), "NewBudget(0.2, 1)") || i.String() != retries.Throttle.String() {
		t.Errorf("with nil objects: %s and %s; want the outer policy's own budget kept, Throttle as it was", o, i)
	}
}
