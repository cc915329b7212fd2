package feed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestReadFromMatchesRead: reading from the start of any element yields
// what Read yields from there, positions, invalid operations and the
// broken end included.
func TestReadFromMatchesRead(t *testing.T) {
	t.Parallel()
	for _, input := range []string{
		"{\"put\":\"id:a:b::1\",\"fields\":{}}\n{\"remove\":\"id:a:b::2\"}\n{\"put\":\"bad\",\"fields\":{}}\n  {\"remove\":\"id:a:b::3\"} {\"remove\":\"id:a:b::4\"}\n",
		"[\n{\"put\":\"id:a:b::1\",\"fields\":{}},\n{\"remove\":\"id:a:b::2\"},{\"put\":\"bad\",\"fields\":{}},\n{\"remove\":\"id:a:b::3\"}\n]\n",
		"\ufeff[{\"remove\":\"id:a:b::1\"},\n{\"remove\":\"id:a:b::2\"},\n{\"remove\": ]",
	} {
		type elem struct {
			id, err    string
			line       int
			offset     int64
			isOpErr    bool
			inputError bool
		}
		collect := func(ops func(func(Operation, error) bool)) []elem {
			var got []elem
			for o, err := range ops {
				e := elem{id: o.ID, line: o.Line, offset: o.Offset}
				var bad *OperationError
				var stop *InputError
				switch {
				case errors.As(err, &bad):
					e.line, e.offset, e.isOpErr, e.err = bad.Line, bad.Offset, true, err.Error()
				case errors.As(err, &stop):
					e.line, e.offset, e.inputError, e.err = stop.Line, stop.Offset, true, err.Error()
				}
				got = append(got, e)
			}
			return got
		}
		all := collect(Read(strings.NewReader(input)))
		if len(all) < 3 {
			t.Fatalf("Read(%q) yields %d elements", input, len(all))
		}
		array := strings.HasPrefix(strings.TrimPrefix(input, "\ufeff"), "[")
		for i, e := range all {
			if e.inputError {
				continue // nothing starts there to resume from but the broken value
			}
			if !strings.HasPrefix(input[e.offset:], "{") {
				t.Errorf("element %d of %q: offset %d does not start an object", i, input, e.offset)
				continue
			}
			got := collect(ReadFrom(strings.NewReader(input[e.offset:]), e.offset, e.line, array))
			if fmt.Sprint(got) != fmt.Sprint(all[i:]) {
				t.Errorf("ReadFrom(element %d of %q) =\n%v\nwant\n%v", i, input, got, all[i:])
			}
		}
	}
}

// TestBeforeUnsafe: the hook sees the operations not safe to repeat, and
// only them, before they are sent; its error keeps one from being sent and
// reports it as of unknown outcome, written to Unknown.
func TestBeforeUnsafe(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	var mu sync.Mutex
	var seen []string
	var failed, unknown strings.Builder
	errEarlier := errors.New("sent by an earlier feed")
	c, err := New(Config{URL: srv.URL, Failed: &failed, Unknown: &unknown, BeforeUnsafe: func(_ context.Context, o Operation) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o.ID)
		switch {
		case strings.HasSuffix(o.ID, "::refused"):
			return errEarlier
		case strings.HasSuffix(o.ID, "::kept"):
			return fmt.Errorf("partition revoked: %w", ErrNotSent)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	input := `{"put":"id:a:b::p","fields":{}}
{"update":"id:a:b::inc","fields":{"n":{"increment":1}}}
{"update":"id:a:b::cond","condition":"true","fields":{"n":{"assign":1}}}
{"update":"id:a:b::refused","fields":{"n":{"increment":1}}}
{"update":"id:a:b::assign","fields":{"n":{"assign":1}}}
{"update":"id:a:b::kept","fields":{"n":{"increment":1}}}
{"put":"id:a:b::kept","fields":{}}
`
	var errs sync.Map
	_ = c.Feed(t.Context(), Read(strings.NewReader(input)), func(o Operation, _ Result, err error) { errs.Store(o.Kind.String()+" "+o.ID, err) })
	slices.Sort(seen)
	if fmt.Sprint(seen) != "[id:a:b::cond id:a:b::inc id:a:b::kept id:a:b::refused]" {
		t.Errorf("BeforeUnsafe saw %v, want the increments and the conditional update", seen)
	}
	v, _ := errs.Load("update id:a:b::refused")
	var fe *Error
	if err, _ := v.(error); !errors.As(err, &fe) || !fe.Unknown || !errors.Is(err, errEarlier) {
		t.Errorf("the refused operation ended with %v, want an *Error of unknown outcome matching the hook's", v)
	}
	if n := srv.Requests("PUT", "/document/v1/a/b/docid/refused"); n != 0 {
		t.Errorf("the refused operation was sent %d times", n)
	}
	if unknown.String() != "{\"update\":\"id:a:b::refused\",\"fields\":{\"n\":{\"increment\":1}}}\n" || failed.Len() != 0 {
		t.Errorf("Unknown = %q, Failed = %q; want the refused operation in Unknown only", unknown.String(), failed.String())
	}
	// Refused with ErrNotSent: kept by the caller, not sent, and the put
	// after it on the document goes out.
	v, _ = errs.Load("update id:a:b::kept")
	if err, _ := v.(error); !errors.Is(err, ErrNotSent) || srv.Requests("PUT", "/document/v1/a/b/docid/kept") != 0 || srv.Requests("POST", "/document/v1/a/b/docid/kept") != 1 {
		t.Errorf("the kept update ended with %v; PUT sent %d times, the put after it %d times; want ErrNotSent, 0, 1",
			v, srv.Requests("PUT", "/document/v1/a/b/docid/kept"), srv.Requests("POST", "/document/v1/a/b/docid/kept"))
	}
	if r := c.Report(); r.Complete() {
		t.Errorf("the feed is complete, but an operation was refused")
	}
}

// TestHoldBack: the operations on a held-back document are not sent, and
// are written to Failed, as after a failure of an earlier one.
func TestHoldBack(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	var failed strings.Builder
	c, err := New(Config{URL: srv.URL, Failed: &failed, HoldBack: []string{"id:a:b::held"}})
	if err != nil {
		t.Fatal(err)
	}
	input := "{\"put\":\"id:a:b::held\",\"fields\":{}}\n{\"put\":\"id:a:b::free\",\"fields\":{}}\n"
	var heldErr error
	_ = c.Feed(t.Context(), Read(strings.NewReader(input)), func(o Operation, _ Result, err error) {
		if o.ID == "id:a:b::held" {
			heldErr = err
		}
	})
	if !errors.Is(heldErr, ErrHeldBack) || srv.Requests("POST", "/document/v1/a/b/docid/held") != 0 {
		t.Errorf("the held-back put ended with %v after %d requests, want ErrHeldBack after none", heldErr, srv.Requests("POST", "/document/v1/a/b/docid/held"))
	}
	if failed.String() != "{\"put\":\"id:a:b::held\",\"fields\":{}}\n" || srv.Requests("POST", "/document/v1/a/b/docid/free") != 1 {
		t.Errorf("Failed = %q; the other put sent %d times", failed.String(), srv.Requests("POST", "/document/v1/a/b/docid/free"))
	}
}

// TestResumable: a Feed that is interrupted with Resumable writes neither
// the operations it did not send nor the input it did not read to Failed;
// done hears of the first with ErrNotSent, and of those canceled on the
// wire with ErrInterrupted. Without Resumable it writes both.
func TestResumable(t *testing.T) {
	t.Parallel()
	for _, resumable := range []bool{false, true} {
		t.Run(fmt.Sprint(resumable), func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			held := make(chan struct{}, 64)
			srv := feedtest.New(t, func(r *http.Request, _ int) int {
				held <- struct{}{}
				<-release
				return 0
			})
			defer close(release)
			var failed strings.Builder
			c, err := New(Config{URL: srv.URL, Concurrency: 2, Grace: -1, Failed: &failed, Resumable: resumable})
			if err != nil {
				t.Fatal(err)
			}
			var in strings.Builder
			for i := range 500 {
				fmt.Fprintf(&in, "{\"put\":\"id:a:b::%d\",\"fields\":{}}\n", i)
			}
			// The interrupt comes once two requests are held and the third
			// operation was taken by the feed (the reader is at the fourth):
			// else it may come before the feed read anything it did not send.
			fourth := make(chan struct{})
			read := Read(strings.NewReader(in.String()))
			ops := func(yield func(Operation, error) bool) {
				i := 0
				for o, err := range read {
					if i++; i == 4 {
						close(fourth)
					}
					if !yield(o, err) {
						return
					}
				}
			}
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-held
				<-held
				<-fourth
				cancel()
			}()
			var mu sync.Mutex
			notSent, interrupted := 0, 0
			_ = c.Feed(ctx, ops, func(_ Operation, _ Result, err error) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, ErrNotSent):
					notSent++
				case errors.Is(err, ErrInterrupted):
					interrupted++
				}
			})
			if interrupted != 2 {
				t.Errorf("done heard of %d operations interrupted (ErrInterrupted), want the 2 canceled on the wire", interrupted)
			}
			lines := strings.Count(failed.String(), "\n")
			switch {
			case resumable && (lines > 2 || notSent == 0):
				t.Errorf("Resumable: Failed holds %d operations and done heard of %d not sent; want at most the 2 canceled on the wire, and some not sent", lines, notSent)
			case !resumable && lines < 400:
				t.Errorf("without Resumable: Failed holds %d operations, want the rest of the input", lines)
			}
		})
	}
}
