package control_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries/control"
)

// bodyTransport answers every request with body and status 200.
type bodyTransport string

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(b))), Request: r}, nil
}

// FuzzReaders gives the readers of the config server's JSON (the
// generation, the deploy's answer, the convergence check, a container's
// health) any body as a 200: each call returns, with a value or an error,
// and never panics; a deploy answer without a numeric session id is an
// error, never a deployment.
func FuzzReaders(f *testing.F) {
	f.Add(`{"generation":3}`)
	f.Add(`{"session-id":"4","activated":true,"configChangeActions":{"restart":[{"clusterName":"c","services":[{"serviceType":"container","hostName":"h"}]}]}}`)
	f.Add(`{"services":[{"host":"h","port":8080,"type":"container","currentGeneration":4}],"wantedGeneration":4,"currentGeneration":4}`)
	f.Add(`{"services":[{"host":"h","type":"searchnode","currentGeneration":-1,"config":{"status":"failed","message":"m"}}],"wantedGeneration":4}`)
	f.Add(`{"status":{"code":"up"}}`)
	f.Add(`{"session-id":"x"}`)
	f.Add(`{"session-id":"0","activated":false}`) // found by the fuzzer in a CI run: taken as generation 0
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		synctest.Test(t, func(t *testing.T) { // the waits' time is fake
			c, err := control.New(control.Config{URL: "http://cfg.test:19071", Transport: bodyTransport(body)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = c.Generation(ctx)
			if d, err := c.Deploy(ctx, []byte("PK")); err == nil && d.Generation <= 0 && !d.Adopted {
				t.Errorf("Deploy of %q: %+v, no error, and no generation", body, d)
			}
			_, _ = c.Wait(ctx, 4, nil)
		})
	})
}
