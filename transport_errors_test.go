package retries_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

func TestTransportErrorsLeakNothing(t *testing.T) {
	const (
		password = "s3cret-pass"
		token    = "s3cret-token"
		body     = "s3cret-body"
	)
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	type onceReader struct{ io.Reader }
	for _, tc := range []struct {
		name    string
		addr    func(t *testing.T) string
		policy  retries.Policy
		once    bool // a body that cannot be replayed
		cancel  bool // the context is canceled before the call
		timeout time.Duration
		layers  bool // the policy around a Throttle Transport

		attemptErrs bool // attempts fail with errors, which hooks see
	}{
		{name: "connection refused, last error", addr: refused, policy: retries.DocV1, attemptErrs: true},
		{name: "connection refused, RetryError", addr: refused, policy: retries.Query, attemptErrs: true},
		{name: "connection refused, two layers", addr: refused, policy: retries.DocV1, layers: true, attemptErrs: true},
		{name: "giving up on 503, two layers", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(503)).Listener.Addr().String()
		}, policy: retries.Query.Copy(retries.WithRetry(retries.RetryIfStatus(503))), layers: true},
		{name: "giving up on 429", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.Throttle.Copy(retries.WithStop(retries.StopAfterAttempt(2)))},
		{name: "body not replayable", addr: func(t *testing.T) string {
			return tpServe(t, tpStatuses(429)).Listener.Addr().String()
		}, policy: retries.SyncRequest, once: true},
		{name: "context canceled", addr: refused, policy: retries.DocV1, cancel: true},
		{name: "attempt timeout", addr: func(t *testing.T) string {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			return tpServe(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}).Listener.Addr().String()
		}, policy: retries.DocV1.Copy(retries.WithStop(retries.StopAfterAttempt(2))), timeout: 10 * time.Millisecond, attemptErrs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const path = "/document/v1/ns/doc/docid/1"
			rawURL := "http://admin:" + password + "@" + tc.addr(t) + path
			wantURL := strings.Replace(rawURL, password, "xxxxx", 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			var rb io.Reader = strings.NewReader(body)
			if tc.once {
				rb = onceReader{rb}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, rb)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			var opts []retries.TransportOption
			if tc.timeout > 0 {
				opts = append(opts, retries.WithAttemptTimeout(tc.timeout))
			}
			var base http.RoundTripper = tpNewTracker(t)
			if tc.layers {
				base = retries.NewTransport(base, retries.Throttle.Copy(tpNoWait))
			}
			var attemptErrs []error
			p := tc.policy.Copy(tpNoWait, retries.WithAfter(func(s retries.State) {
				if s.Err != nil {
					attemptErrs = append(attemptErrs, s.Err)
				}
			}))
			rt := retries.NewTransport(base, p, opts...)

			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("RoundTrip() error = nil, want an error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, secret := range []string{password, token, body} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q contains %q", msg, secret)
				}
			}
			// http.Client names the request; RoundTrip does not, as
			// http.Transport does not.
			if strings.Contains(msg, path) || strings.Contains(msg, "retries: retries:") {
				t.Errorf("RoundTrip() error %q names the request", msg)
			}
			// The predicate and the hooks see each attempt's error as a
			// *TransportError that names it and matches *url.Error.
			if tc.attemptErrs && len(attemptErrs) == 0 {
				t.Error("no attempt failed with an error")
			}
			for _, err := range attemptErrs {
				var te *retries.TransportError
				if !errors.As(err, &te) || te.Method != http.MethodPost || te.URL != wantURL {
					t.Errorf("attempt error = %#v, want a *TransportError for POST %s", err, wantURL)
				}
				var ue *url.Error
				if !errors.As(err, &ue) || ue.Op != "Post" || ue.URL != wantURL {
					t.Errorf("errors.As(%v, *url.Error) = %#v, want Op Post and URL %s", err, ue, wantURL)
				}
				if !strings.HasPrefix(err.Error(), "retries: POST "+wantURL+": ") {
					t.Errorf("attempt error %q does not start with %q", err, "retries: POST "+wantURL+": ")
				}
			}
			// Through an http.Client, the client's own wrapping leaks nothing either.
			req2, _ := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(body))
			req2.Header.Set("Authorization", "Bearer "+token)
			resp, err = (&http.Client{Transport: rt}).Do(req2)
			if err == nil {
				resp.Body.Close()
			} else {
				t.Log(err)
			}
			for _, secret := range []string{password, token, body} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("client error %q contains %q", err, secret)
				}
			}
			if err != nil && (strings.Count(err.Error(), path) != 1 || strings.Contains(err.Error(), "retries: retries:")) {
				t.Errorf("client error %q does not name the request exactly once", err)
			}
		})
	}
}
