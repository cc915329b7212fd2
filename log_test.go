package retries_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/seed32e55400/retries"
)

// ctxHandler is a slog handler that records a value the call's context
// carries, as a tracing handler reads a trace id.
type ctxHandler struct {
	slog.Handler
	seen *[]any
}

func (h ctxHandler) Enabled(ctx context.Context, l slog.Level) bool {
	*h.seen = append(*h.seen, ctx.Value(ctxKey{}))
	return true
}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	*h.seen = append(*h.seen, ctx.Value(ctxKey{}))
	return nil
}

// textLogger logs text to w without the time, so that tests can compare it.
func textLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestLogRetries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := textLogger(&buf)
		p := retries.DocV1.Copy(retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelWarn)))
		_, _, _ = runValue(t, t.Context(), p, statusSeq(503, 200))
		_ = p.Do(t.Context(), func(context.Context) error { return errBoom })
		want := `level=WARN msg="retries: retrying" policy=DocV1 attempt=1 elapsed=0s wait=1s value="*http.Response with status 503"` + "\n" +
			`level=WARN msg="retries: retrying" policy=DocV1 attempt=1 elapsed=0s wait=1s error=boom` + "\n" +
			`level=WARN msg="retries: retrying" policy=DocV1 attempt=2 elapsed=1s wait=2s error=boom` + "\n"
		if buf.String() != want {
			t.Errorf("log =\n%s\nwant\n%s", buf.String(), want)
		}
	})
}

func TestLogRetriesUsesTheCallsContext(t *testing.T) {
	t.Parallel()
	var seen []any
	logger := slog.New(ctxHandler{seen: &seen})
	p := retries.New(retries.WithStop(retries.StopAfterAttempt(2)),
		retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelWarn)))
	ctx := context.WithValue(t.Context(), ctxKey{}, "trace-7")
	_ = p.Do(ctx, func(context.Context) error { return errBoom })
	if len(seen) < 2 {
		t.Fatalf("the handler was asked %d times, want Enabled and Handle", len(seen))
	}
	for _, v := range seen {
		if v != "trace-7" {
			t.Errorf("the handler saw %v, want the call's context every time", seen)
			break
		}
	}
}

// ExampleLogRetries logs each retry of a call with a text handler; the time
// and the elapsed time are left out so that the output is stable.
func ExampleLogRetries() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "elapsed" {
				return slog.Attr{}
			}
			return a
		},
	}))
	p := retries.New(
		retries.WithStop(retries.StopAfterAttempt(3)),
		retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelWarn)),
	)
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// level=WARN msg="retries: retrying" attempt=1 wait=0s error="connection refused"
	// level=WARN msg="retries: retrying" attempt=2 wait=0s error="connection refused"
	// err: <nil>
}

// TestLogRetriesNamesTheRequest checks that under a Transport each retry's
// log names the request's method and URL, without its password.
func TestLogRetriesNamesTheRequest(t *testing.T) {
	t.Parallel()
	srv := tpServe(t, tpStatuses(503, 200))
	var buf bytes.Buffer
	logger := textLogger(&buf)
	p := retries.Query.Copy(tpNoWait, retries.WithRetry(retries.RetryIfStatus(503)),
		retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelInfo)))
	u := strings.Replace(srv.URL, "http://", "http://admin:s3cret@", 1) + "/doc"
	req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("x"))
	resp, err := retries.NewTransport(nil, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := "method=PUT url=" + strings.Replace(u, "s3cret", "xxxxx", 1)
	if got := buf.String(); !strings.Contains(got, want) || strings.Contains(got, "s3cret") {
		t.Errorf("log = %q, want it to contain %q and no password", got, want)
	}
}

func TestTransportRequestElsewhere(t *testing.T) {
	t.Parallel()
	if m, u, ok := retries.TransportRequest(context.Background()); ok || m != "" || u != "" {
		t.Errorf("TransportRequest(Background) = %q, %q, %v; want nothing", m, u, ok)
	}
}
