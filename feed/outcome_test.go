package feed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/internal/redact"
)

// TestResultSaysWhatHappened: a 412 and a 404 to a remove are answers
// (err == nil), and the Result says which, with the server's message.
func TestResultSaysWhatHappened(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		switch {
		case r.URL.Query().Get("condition") != "":
			return http.StatusPreconditionFailed
		case r.Method == http.MethodDelete:
			return http.StatusNotFound
		}
		return 0
	})
	c, err := New(testFeedConfig(srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Send(t.Context(), Operation{Kind: Put, ID: "id:ns:d::1", Fields: json.RawMessage(`{}`), Condition: "d.n == 1"})
	if err != nil || !res.ConditionNotMet() || res.NotFound() || res.Message == "" {
		t.Errorf("conditional put: %+v, %v; want err nil, ConditionNotMet and the server's message", res, err)
	}
	res, err = c.Remove(t.Context(), "id:ns:d::2")
	if err != nil || !res.NotFound() || res.ConditionNotMet() {
		t.Errorf("remove: %+v, %v; want err nil and NotFound", res, err)
	}
	res, err = c.Put(t.Context(), "id:ns:d::3", json.RawMessage(`{}`))
	if err != nil || res.NotFound() || res.ConditionNotMet() || res.Message != "" {
		t.Errorf("put: %+v, %v; want a plain acknowledgement", res, err)
	}
}

// TestLoggerRecords: with Config.Logger, each element not acknowledged is
// a record with its id, kind, tag, status, attempts and outcome; an
// operation from an iterator has no line, and the command's lines do not
// say "line 0".
func TestLoggerRecords(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			return http.StatusBadRequest
		}
		return 0
	})
	var logs, lines bytes.Buffer
	cfg := testFeedConfig(srv.URL, &lines)
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ops := func(yield func(Operation, error) bool) {
		_ = yield(Operation{Kind: Put, ID: "id:ns:d::ok", Fields: json.RawMessage(`{}`), Tag: "row 1"}, nil) &&
			yield(Operation{Kind: Put, ID: "id:ns:d::bad", Fields: json.RawMessage(`{}`), Tag: "row 2"}, nil) &&
			yield(Operation{Kind: Remove, ID: "id:ns:d::bad", Tag: "row 3"}, nil)
	}
	_ = c.Feed(t.Context(), ops, nil)
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2:\n%s", len(recs), logs.String())
	}
	failed, held := recs[0], recs[1]
	if failed["outcome"] != "failed" || failed["id"] != "id:ns:d::bad" || failed["kind"] != "put" || failed["tag"] != "row 2" ||
		failed["status"] != 400.0 || failed["attempts"] != 1.0 || failed["level"] != "WARN" || failed["line"] != nil {
		t.Errorf("record of the failure: %v", failed)
	}
	if held["outcome"] != "heldback" || held["kind"] != "remove" || held["tag"] != "row 3" {
		t.Errorf("record of the operation held back: %v", held)
	}
	if strings.Contains(lines.String(), "line 0") || !strings.Contains(lines.String(), "failed: put id:ns:d::bad: 400") {
		t.Errorf("the command's lines:\n%s", lines.String())
	}
}

// TestRedactsEncodedSecrets: a header value the server echoes as sent,
// URL-encoded or base64-encoded, is redacted in what a report quotes; so
// is a short value, as a whole word only.
func TestRedactsEncodedSecrets(t *testing.T) {
	t.Parallel()
	secret := "Bearer s3cr3t/t0ken+x=y"
	r := redact.New(http.Header{"Authorization": {secret}, "X-Tenant": {"ab1"}})
	token := "s3cr3t/t0ken+x=y"
	for _, echo := range []string{
		secret, token, url.QueryEscape(secret), url.QueryEscape(token), url.PathEscape(token),
		base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(token)),
	} {
		body := `{"message":"refused: the header was ` + echo + ` (tenant ab1, cab1n kept)"}`
		got := message([]byte(body), r)
		if strings.Contains(got, echo) || !strings.Contains(got, "[redacted]") {
			t.Errorf("message(%q) = %q, want %q redacted", body, got, echo)
		}
		if strings.Contains(got, "ab1,") || !strings.Contains(got, "cab1n") {
			t.Errorf("message(%q) = %q, want ab1 redacted as a word and cab1n kept", body, got)
		}
	}
}

// TestFenceStopsEveryRequest: Config.Fence is asked before each request,
// retries included. An operation it refuses before its first request is
// never sent, one it refuses before a retry is not sent again, and both
// end with its error (ErrNotSent: kept, neither written nor counted as
// failed), with their attempts.
func TestFenceStopsEveryRequest(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, n int) int {
		if strings.HasSuffix(r.URL.Path, "/retried") && n == 0 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	var failed bytes.Buffer
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Failed = &failed
	fenced := fmt.Errorf("the partition moved: %w", ErrNotSent)
	var mu sync.Mutex
	asked := map[string]int{}
	cfg.Fence = fenceFuncs{
		admit: func(_ context.Context, o Operation) error {
			mu.Lock()
			defer mu.Unlock()
			asked[o.ID]++
			switch {
			case o.ID == "id:ns:d::fenced", o.ID == "id:ns:d::retried" && asked[o.ID] > 1:
				return fenced
			}
			return nil
		},
		until: func() time.Time { return time.Now().Add(time.Hour) },
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	input := `{"put":"id:ns:d::ok","fields":{}}
{"put":"id:ns:d::fenced","fields":{}}
{"put":"id:ns:d::retried","fields":{}}
`
	got := map[string]Result{}
	errs := map[string]error{}
	_ = c.Feed(t.Context(), Read(strings.NewReader(input)), func(o Operation, r Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		got[o.ID], errs[o.ID] = r, err
	})
	if errs["id:ns:d::ok"] != nil || !errors.Is(errs["id:ns:d::fenced"], fenced) || !errors.Is(errs["id:ns:d::retried"], ErrNotSent) {
		t.Errorf("errors %v, want the fenced ones to end with the fence's error", errs)
	}
	if got["id:ns:d::fenced"].Attempts != 0 || got["id:ns:d::retried"].Attempts != 1 {
		t.Errorf("attempts %d and %d, want 0 and 1", got["id:ns:d::fenced"].Attempts, got["id:ns:d::retried"].Attempts)
	}
	if ids := appliedIDs(srv); ids["fenced"] != 0 || ids["retried"] != 0 || ids["ok"] != 1 {
		t.Errorf("applied %v, want only ok", ids)
	}
	if res := c.Report(); res.failed != 0 || failed.Len() != 0 {
		t.Errorf("%d failed, -failed holds %q; want the fenced ones kept, not failed", res.failed, failed.String())
	}
}

// TestFenceLifetimeHaltsWaits: when Fence.Lifetime's context ends, an
// operation waiting for a retry ends at once, kept with the context's
// cause and its attempt counted, not sent again; one whose request is on
// the wire ends only once its answer is in (acknowledged here), and an
// operation without a lifetime is not touched.
func TestFenceLifetimeHaltsWaits(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan string, 8), make(chan struct{})
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/waiting"):
			arrived <- "waiting"
			return http.StatusServiceUnavailable // and the policies wait an hour
		case strings.HasSuffix(r.URL.Path, "/onwire"):
			arrived <- "onwire"
			<-release
		}
		return 0
	})
	cfg := testFeedConfig(srv.URL, nil)
	hour := retries.WithWait(retries.WaitFixed(time.Hour))
	cfg.Outer, cfg.Inner, cfg.Timeout = retries.DocV1.Copy(hour), retries.Throttle.Copy(hour), 2*time.Hour
	life, end := context.WithCancelCause(context.Background())
	cfg.Fence = fenceFuncs{
		admit: func(context.Context, Operation) error { return nil },
		until: func() time.Time { return time.Now().Add(time.Hour) },
		life: func(o Operation) context.Context {
			if strings.HasSuffix(o.ID, "::ok") {
				return nil
			}
			return life
		},
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type ending struct {
		res Result
		err error
	}
	ended := map[string]chan ending{"waiting": make(chan ending, 1), "onwire": make(chan ending, 1), "ok": make(chan ending, 1)}
	input := `{"put":"id:ns:d::waiting","fields":{}}
{"put":"id:ns:d::onwire","fields":{}}
{"put":"id:ns:d::ok","fields":{}}
`
	fed := make(chan error, 1)
	go func() {
		fed <- c.Feed(t.Context(), Read(strings.NewReader(input)), func(o Operation, r Result, err error) {
			ended[o.ID[strings.LastIndex(o.ID, ":")+1:]] <- ending{r, err}
		})
	}()
	<-arrived
	<-arrived // both: one waits an hour for its retry, one is on the wire
	if e := <-ended["ok"]; e.err != nil {
		t.Errorf("ok: %v", e.err)
	}
	moved := fmt.Errorf("the partition moved: %w", ErrNotSent)
	end(moved)
	select {
	case e := <-ended["waiting"]:
		if !errors.Is(e.err, moved) || e.res.Attempts != 1 {
			t.Errorf("waiting ended with %v after %d attempts, want the lifetime's cause after 1", e.err, e.res.Attempts)
		}
	case <-time.After(time.Minute): // a guard: the wait is an hour
		t.Fatal("the operation waiting for a retry outlived its lifetime")
	}
	select {
	case e := <-ended["onwire"]:
		t.Fatalf("onwire ended (%v) with its request on the wire", e.err)
	default:
	}
	close(release)
	if e := <-ended["onwire"]; e.err != nil {
		t.Errorf("onwire: %v, want acknowledged: its answer came", e.err)
	}
	if err := <-fed; err != nil {
		t.Errorf("Feed: %v", err)
	}
	if ids := appliedIDs(srv); ids["waiting"] != 0 || ids["onwire"] != 1 || ids["ok"] != 1 {
		t.Errorf("applied %v", ids)
	}
}
