package feed

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestDefaults: a zero field is the command's default, a negative
// duration none; the attempt timeout outlasts a longer ServerTimeout.
func TestDefaults(t *testing.T) {
	t.Parallel()
	c := withDefaults(Config{})
	if c.Timeout != 2*time.Minute || c.AttemptTimeout != 30*time.Second || c.Grace != 5*time.Second ||
		c.MaxOutage != 5*time.Minute || c.FirstResponse != 30*time.Second || c.MaxInFlight != 1024 || c.Budget == nil {
		t.Errorf("withDefaults(Config{}) = %+v", c)
	}
	if isZero(c.Outer) || isZero(c.Inner) || c.Outer.String() != DefaultOuter.String() || c.Inner.String() != DefaultInner.String() {
		t.Errorf("layers %v, %v; want DefaultOuter, DefaultInner", c.Outer, c.Inner)
	}
	off := withDefaults(Config{Timeout: -1, Grace: -1, MaxOutage: -1, FirstResponse: -1, AttemptTimeout: -1, NoBudget: true})
	if off.Timeout != 0 || off.Grace != 0 || off.MaxOutage != 0 || off.FirstResponse != 0 || off.AttemptTimeout != 0 || off.Budget != nil {
		t.Errorf("negative durations and NoBudget: %+v, want all off", off)
	}
	for server, want := range map[time.Duration]time.Duration{
		0: 30 * time.Second, 5 * time.Second: 30 * time.Second, time.Minute: 67 * time.Second,
	} {
		if got := withDefaults(Config{ServerTimeout: server}).AttemptTimeout; got != want {
			t.Errorf("ServerTimeout %v: AttemptTimeout %v, want %v", server, got, want)
		}
	}
}

// sendAll sends a put of each of goroutines×perG distinct documents from
// goroutines goroutines at once, and returns the errors.
func sendAll(t *testing.T, c *Client, goroutines, perG int) []error {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				_, err := c.Put(context.Background(), fmt.Sprintf("id:ns:d::%d-%d", g, i), json.RawMessage(`{"n":1}`))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// TestSendConcurrentThrottled: 64 goroutines × 20 Sends against a server
// that admits 600 requests a second and answers 429 beyond, and against
// one with 8 slots that answers 429 when they are full: every document is
// acknowledged and stored once, for at most 1.6 requests a document.
func TestSendConcurrentThrottled(t *testing.T) {
	t.Parallel()
	const goroutines, perG = 64, 20
	for _, tc := range []struct {
		name  string
		fault func() func(*http.Request, int) int
	}{
		{"rate_600", func() func(*http.Request, int) int {
			var mu sync.Mutex
			tokens, last := 10.0, time.Now()
			return func(*http.Request, int) int {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				tokens = min(10, tokens+now.Sub(last).Seconds()*600)
				last = now
				if tokens < 1 {
					return http.StatusTooManyRequests
				}
				tokens--
				return 0
			}
		}},
		{"slots_8", func() func(*http.Request, int) int {
			var busy atomic.Int64
			return func(*http.Request, int) int {
				if busy.Add(1) > 8 {
					busy.Add(-1)
					return http.StatusTooManyRequests
				}
				defer busy.Add(-1)
				time.Sleep(2 * time.Millisecond) // the server's service time
				return 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := feedtest.New(t, tc.fault())
			cfg := Config{URL: srv.URL}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if errs := sendAll(t, c, goroutines, perG); len(errs) > 0 {
				t.Errorf("%d Sends failed, the first: %v", len(errs), errs[0])
			}
			stored := map[string]int{}
			for _, a := range srv.Applied() {
				stored[strings.Fields(a)[1]]++
			}
			for k, n := range stored {
				if n != 1 {
					t.Errorf("%s stored %d times", k, n)
				}
			}
			requests := c.wire.requests.Load()
			if len(stored) != goroutines*perG || float64(requests) > 1.6*goroutines*perG {
				t.Errorf("%d documents stored with %d requests, want %d with at most %.0f", len(stored), requests, goroutines*perG, 1.6*goroutines*perG)
			}
			t.Logf("%d requests for %d documents", requests, goroutines*perG)
		})
	}
}

// TestSendWaitsOutAnOutage: a server that answers 503 to everything for 2
// s in the middle of concurrent Sends: none fails, and at most 100
// requests go into the outage.
func TestSendWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	srv, inOutage := outageServer(t, "503", 300, 2*time.Second)
	c, err := New(Config{URL: srv.URL, MaxProbeInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if errs := sendAll(t, c, 32, 40); len(errs) > 0 {
		t.Errorf("%d Sends failed, the first: %v", len(errs), errs[0])
	}
	if n := inOutage.Load(); n > 100 || n == 0 {
		t.Errorf("%d requests during the outage, want 1 to 100", n)
	}
	if got := len(appliedIDs(srv)); got != 32*40 {
		t.Errorf("%d documents stored, want %d", got, 32*40)
	}
}

// TestSendUnsafeReset: a conditional update whose connection is reset
// fails, with its outcome unknown, and is not sent again; a put in the
// same situation is sent again and acknowledged.
func TestSendUnsafeReset(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(_ *http.Request, n int) int {
		if n == 0 {
			return feedtest.Reset
		}
		return 0
	})
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Send(t.Context(), Operation{Kind: Update, ID: "id:ns:d::1", Condition: "d.n==1", Fields: json.RawMessage(`{"n":{"assign":2}}`)})
	var fe *Error
	if !errors.As(err, &fe) || !fe.Unknown || fe.Status != 0 || res.Attempts != 1 {
		t.Errorf("conditional update: %+v, %v; want an *Error with its outcome unknown after 1 attempt", res, err)
	}
	if n := srv.Requests(http.MethodPut, "/document/v1/ns/d/docid/1?condition=d.n%3D%3D1"); n != 1 {
		t.Errorf("the conditional update was sent %d times, want once", n)
	}
	res, err = c.Put(t.Context(), "id:ns:d::2", json.RawMessage(`{"n":2}`))
	if err != nil || res.Status != 200 || res.Attempts != 2 {
		t.Errorf("put: %+v, %v; want 200 after 2 attempts", res, err)
	}
}

// TestSendAnswers: Send's error is nil exactly for an acknowledgement (a
// 2xx, a 412 to an operation with a condition, a 404 to a remove), and
// otherwise an *Error with the status;
// an invalid Operation is refused before anything is sent; a closed Client
// sends nothing.
func TestSendAnswers(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, answers)
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, tc := range []struct {
		op     Operation
		status int
		ok     bool
	}{
		{Operation{Kind: Put, ID: "id:ns:d::1", Fields: json.RawMessage(`{}`)}, 200, true},
		{Operation{Kind: Update, ID: "id:ns:d::1", Condition: "false", Fields: json.RawMessage(`{}`)}, 412, true},
		{Operation{Kind: Remove, ID: "id:ns:d::missing"}, 404, true},
		{Operation{Kind: Put, ID: "id:ns:d::missing", Fields: json.RawMessage(`{}`)}, 404, false},
		{Operation{Kind: Put, ID: "id:ns:d::bad", Fields: json.RawMessage(`{}`)}, 400, false},
		// A put or a remove without a condition cannot fail one: a 412 to
		// it says something is wrong, and nothing was applied.
		{Operation{Kind: Put, ID: "id:ns:d::precondition", Fields: json.RawMessage(`{}`)}, 412, false},
		{Operation{Kind: Remove, ID: "id:ns:d::precondition"}, 412, false},
	} {
		res, err := c.Send(ctx, tc.op)
		var fe *Error
		if res.Status != tc.status || (err == nil) != tc.ok || !tc.ok && (!errors.As(err, &fe) || fe.Status != tc.status) {
			t.Errorf("%s %s: %+v, %v; want status %d, acknowledged %v", tc.op.Kind, tc.op.ID, res, err, tc.status, tc.ok)
		}
	}
	for _, bad := range []Operation{
		{Kind: Put, ID: "nope", Fields: json.RawMessage(`{}`)},
		{Kind: Put, ID: "id:ns:d::x"},
		{Kind: Remove, ID: "id:ns:d::x", Fields: json.RawMessage(`{}`)},
		{Kind: Put, ID: "id:ns:d::x", Fields: json.RawMessage(`[1]`)},
		{Kind: Put, ID: "id:ns:d::x", Fields: json.RawMessage(`{} {}`)},
		{Kind: Kind(7), ID: "id:ns:d::x"},
		{Kind: Put, ID: "id:ns:d::\xff", Fields: json.RawMessage(`{}`)},
	} {
		if _, err := c.Send(ctx, bad); err == nil {
			t.Errorf("Send(%+v) = nil, want an error", bad)
		}
	}
	before := len(srv.Applied())
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if _, err := c.Put(ctx, "id:ns:d::2", json.RawMessage(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
	if len(srv.Applied()) != before {
		t.Errorf("a closed Client sent a request")
	}
}

// TestSendOrderPerID: Sends on one document go one at a time, in the
// order they began, while the server delays at random.
func TestSendOrderPerID(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(*http.Request, int) int {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // the server's own delay
		return 0
	})
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n, id = 30, "id:ns:d::same"
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := c.Put(t.Context(), id, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Errorf("Put %d: %v", i, err)
			}
		})
		for c.queues.joins.Load() <= int64(i) { // until Send i has taken its place
			runtime.Gosched()
		}
	}
	wg.Wait()
	var got []string
	for _, a := range srv.Applied() {
		got = append(got, a[strings.LastIndexByte(a, ':')+1:len(a)-2])
	}
	if len(got) != n {
		t.Fatalf("%d applied, want %d", len(got), n)
	}
	for i, g := range got {
		if g != fmt.Sprint(i) {
			t.Fatalf("applied in order %v, want 0 to %d", got, n-1)
		}
	}
}

// TestFeedDone: Feed calls done once for every element of ops, with the
// reader's error, the Result, ErrHeldBack after a failure on the document,
// and hands each Tag back; it returns nil only when every element was
// acknowledged.
func TestFeedDone(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			return http.StatusBadRequest
		}
		return 0
	})
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ops := func(yield func(Operation, error) bool) {
		for i, o := range []Operation{
			{Kind: Put, ID: "id:ns:d::1", Fields: json.RawMessage(`{}`)},
			{Kind: Put, ID: "id:ns:d::bad", Fields: json.RawMessage(`{}`)},
			{Kind: Remove, ID: "id:ns:d::bad"},
			{Kind: Put, ID: "not an id", Fields: json.RawMessage(`{}`)},
			{Kind: Update, ID: "id:ns:d::1", Fields: json.RawMessage(`{"n":{"assign":1}}`)},
		} {
			o.Tag = i
			if !yield(o, nil) {
				return
			}
		}
		yield(Operation{Tag: 5}, errors.New("the source failed"))
	}
	var mu sync.Mutex
	got := map[any]string{}
	err = c.Feed(t.Context(), ops, func(o Operation, r Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[o.Tag]; dup {
			t.Errorf("done called twice for %v", o.Tag)
		}
		switch {
		case err == nil:
			got[o.Tag] = fmt.Sprint(r.Status)
		case errors.Is(err, ErrHeldBack):
			got[o.Tag] = "held back"
		default:
			got[o.Tag] = "error"
		}
	})
	want := map[any]string{0: "200", 1: "error", 2: "held back", 3: "error", 4: "200", 5: "error"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("done heard %v, want %v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "feed: 4 of 6 elements not acknowledged") {
		t.Errorf("Feed() = %v, want it to count 4 of 6 not acknowledged", err)
	}
	if err := c.Feed(t.Context(), Read(strings.NewReader(`{"put":"id:ns:d::2","fields":{}}`)), nil); err != nil {
		t.Errorf("a second Feed, all acknowledged: %v", err)
	}
}

// TestFeedOrderRandomDelays: under Feed, the operations on each document
// are applied in the order ops yields them while the server delays each
// request at random.
func TestFeedOrderRandomDelays(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(*http.Request, int) int {
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the server's own delay
		return 0
	})
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const docs, perDoc = 20, 10
	ops := func(yield func(Operation, error) bool) {
		for v := range perDoc {
			for d := range docs {
				if !yield(Operation{Kind: Put, ID: fmt.Sprintf("id:ns:d::%d", d), Fields: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))}, nil) {
					return
				}
			}
		}
	}
	if err := c.Feed(t.Context(), ops, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	for _, a := range srv.Applied() {
		f := strings.Fields(a)
		seen[f[1]] = append(seen[f[1]], f[2])
	}
	for doc, vs := range seen {
		for v, body := range vs {
			if body != fmt.Sprintf(`{"fields":{"v":%d}}`, v) {
				t.Fatalf("%s: applied %v, want v 0 to %d in order", doc, vs, perDoc-1)
			}
		}
	}
	if len(seen) != docs {
		t.Errorf("%d documents applied, want %d", len(seen), docs)
	}
}

// TestSendErrorCauses: a Send's *Error matches its cause: the budget's
// refusal, an outage longer than MaxOutage (retries.ErrBreakerOpen), and
// the context's end.
func TestSendErrorCauses(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	put := func(c *Client, ctx context.Context, i int) error {
		_, err := c.Put(ctx, fmt.Sprintf("id:ns:d::%d", i), json.RawMessage(`{}`))
		return err
	}
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		c, _ := New(Config{URL: srv.URL, Budget: retries.NewBudget(0, 0)}) // no retry at all
		defer c.Close()
		var fe *Error
		if err := put(c, t.Context(), 1); !errors.Is(err, retries.ErrBudgetExhausted) || !errors.As(err, &fe) || fe.Status != 503 {
			t.Errorf("Put = %v, want an *Error with status 503 matching retries.ErrBudgetExhausted", err)
		}
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		c, _ := New(Config{URL: srv.URL, MaxOutage: 300 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond, NoBudget: true})
		defer c.Close()
		var wg sync.WaitGroup
		var outage atomic.Int64
		for i := range 32 {
			wg.Go(func() {
				err := put(c, t.Context(), i)
				if err == nil {
					t.Errorf("Put %d = nil against a server that answers 503", i)
				}
				if errors.Is(err, retries.ErrBreakerOpen) {
					outage.Add(1)
				}
			})
		}
		wg.Wait()
		if outage.Load() == 0 {
			t.Errorf("no Put failed with the outage; want those that waited it out to")
		}
		if err := put(c, t.Context(), 99); !errors.Is(err, retries.ErrBreakerOpen) {
			t.Errorf("a Put while the too long outage goes on = %v, want retries.ErrBreakerOpen at once", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		c, _ := New(Config{URL: srv.URL})
		defer c.Close()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := put(c, ctx, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Put with a canceled context = %v, want context.Canceled", err)
		}
	})
}

// TestRead: Read yields each operation with its line, an
// *OperationError for an invalid one and reads on, and ends with an
// *InputError for broken JSON, whose Rest is the input from there on.
func TestRead(t *testing.T) {
	t.Parallel()
	in := "{\"put\":\"id:a:b::1\",\"fields\":{\"x\":1}}\n{\"put\":\"nope\",\"fields\":{}}\n{\"remove\":\"id:a:b::2\"}\n{\"put\": ]\n{\"remove\":\"id:a:b::3\"}\n"
	var got []string
	var rest string
	for op, err := range Read(strings.NewReader(in)) {
		var bad *OperationError
		var stop *InputError
		switch {
		case errors.As(err, &bad):
			got = append(got, fmt.Sprintf("bad @%d", bad.Line))
		case errors.As(err, &stop):
			got = append(got, fmt.Sprintf("stop @%d+%d", stop.Line, stop.Offset))
			b, _ := io.ReadAll(stop.Rest())
			rest = string(b)
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, fmt.Sprintf("%s %s @%d %s", op.Kind, op.ID, op.Line, op.Fields))
		}
	}
	want := []string{"put id:a:b::1 @1 {\"x\":1}", "bad @2", "remove id:a:b::2 @3 ", "stop @4+87"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Read yielded %q, want %q", got, want)
	}
	if want := "{\"put\": ]\n{\"remove\":\"id:a:b::3\"}\n"; rest != want {
		t.Errorf("Rest() = %q, want %q", rest, want)
	}
}

// TestReportOfSends: before any Feed, Report gives the Sends' counts and
// the shared objects, as a program showing progress wants them.
func TestReportOfSends(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if _, err := c.Put(t.Context(), fmt.Sprintf("id:ns:d::%d", i), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	r := c.Report()
	if r.Counts().Acknowledged != 3 || c.Counts().Requests != 3 || r.Limiter == nil || r.Breaker == nil || r.Budget == nil {
		t.Errorf("Report counts %+v, limiter %v, breaker %v, budget %v; want 3 acknowledged and the shared objects", r.Counts(), r.Limiter, r.Breaker, r.Budget)
	}
}

// TestRequestHeaders: every request carries Config.Header and, for a URL
// with a user, its basic authorization (as an http.Client adds it), unless
// Config.Header has its own; a body says its type, and gzip when it is
// gzipped. The header maps are shared by the requests: each request
// still carries its own.
func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, auth, ctype, encoding, custom string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.Header.Get("Authorization"), r.Header.Get("Content-Type"),
			r.Header.Get("Content-Encoding"), r.Header.Get("X-Custom")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	for _, tc := range []struct {
		name   string
		header http.Header
		comp   Compression
		want   []seen
	}{
		{"user, plain", http.Header{"X-Custom": {"a"}}, CompressNone, []seen{
			{"POST", basic, "application/json", "", "a"}, {"DELETE", basic, "", "", "a"}}},
		{"user, gzip", nil, CompressGzip, []seen{
			{"POST", basic, "application/json", "gzip", ""}, {"DELETE", basic, "", "", ""}}},
		{"own authorization", http.Header{"Authorization": {"Bearer t"}}, CompressNone, []seen{
			{"POST", "Bearer t", "application/json", "", ""}, {"DELETE", "Bearer t", "", "", ""}}},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		cfg := testFeedConfig(withUser, io.Discard)
		cfg.Header, cfg.Compression = tc.header, tc.comp
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.Put(ctx, "id:ns:d::1", json.RawMessage(`{"f": 1}`)); err != nil {
			t.Fatalf("%s: Put: %v", tc.name, err)
		}
		if _, err := c.Remove(ctx, "id:ns:d::1"); err != nil {
			t.Fatalf("%s: Remove: %v", tc.name, err)
		}
		mu.Lock()
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: requests %+v, want %+v", tc.name, got, tc.want)
		}
		mu.Unlock()
	}
}
