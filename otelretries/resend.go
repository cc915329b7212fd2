package otelretries

import (
	"net/http"

	"github.com/seed32e55400/retries"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ResendKey is OpenTelemetry's attribute for the number of times a request
// was sent again before this one.
const ResendKey = attribute.Key("http.request.resend_count")

// ResendCount returns a RoundTripper for under an otelhttp transport that
// is the base of a [retries.Transport]: on each retry it sets
// http.request.resend_count (the attempt's number less one, from
// [retries.TransportAttempt]) on the client span otelhttp started, which
// is where otelhttp users look for it:
//
//	base := otelhttp.NewTransport(otelretries.ResendCount(http.DefaultTransport))
//	client := &http.Client{Transport: retries.NewTransport(base, p)}
//
// A nil base means [http.DefaultTransport]. A first attempt gets no
// attribute, as the conventions ask.
func ResendCount(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return resendCount{base}
}

type resendCount struct{ base http.RoundTripper }

func (r resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	if n := retries.TransportAttempt(req.Context()); n > 1 {
		trace.SpanFromContext(req.Context()).SetAttributes(ResendKey.Int(n - 1))
	}
	return r.base.RoundTrip(req)
}
