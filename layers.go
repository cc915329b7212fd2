package retries

// Layers returns outer and inner set up as two layers around one server,
// the inner one's Transport inside the outer one's, as pyvespa's
// document/v1 calls are (DocV1 around Throttle): the budget bounds the
// outer layer's retries; the limiter paces, and the breaker guards, every
// attempt of the inner layer, which reaches the server; and while the
// breaker is open the inner layer retries what the outer one would
// ([RetryIfOutage]), so that the outer layer spends no attempt on an
// outage. A nil shared object is not set: the policy keeps its own, if
// any. The policies given are not changed.
//
// With outer, inner := Layers(DocV1, Throttle, l, b, budget), a client is
//
//	&http.Client{Transport: NewTransport(NewTransport(nil, inner), outer)}
func Layers(outer, inner Policy, l *Limiter, b *Breaker, budget *Budget) (Policy, Policy) {
	var in []Option
	if l != nil {
		in = append(in, WithLimiter(l))
	}
	if b != nil {
		in = append(in, WithBreaker(b), WithRetry(RetryAny(inner.Retry(), RetryIfOutage(b, outer.Retry()))))
	}
	if budget != nil {
		outer = outer.Copy(WithBudget(budget))
	}
	return outer, inner.Copy(in...)
}
