package visit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/visit/visittest"
)

// process runs cfg's Process against srv to its end, and returns the
// documents the pages said were processed.
func process(t *testing.T, cfg Config) int {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	processed := 0
	p, err := c.Visit(t.Context(), Progress{}, func(pg Page) error {
		if len(pg.Documents) != 0 {
			t.Errorf("a page of a delete or update holds %d documents", len(pg.Documents))
		}
		processed += pg.Processed
		return nil
	})
	if err != nil || !p.Complete() {
		t.Fatalf("Visit: %v, complete %v", err, p.Complete())
	}
	return processed
}

// TestProcessDelete: a delete by selection through 500s and cuts after
// part of a chunk, 504s, 503s and 429s deletes every document the
// selection matches and no other: a request that failed is asked again
// from its slice's last token, and a missing continuation ends a slice
// only on a 200.
func TestProcessDelete(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 4000, 64, visittest.ChunkFaults)
	processed := process(t, Config{URL: srv.URL, Cluster: "music", Slices: 4, Selection: "music.n % 2 == 0", Process: &Process{}})
	for d := range 4000 {
		if srv.IsDeleted(d) != (d%2 == 0) {
			t.Fatalf("document %d: deleted %v", d, srv.IsDeleted(d))
		}
	}
	if processed > 2000 || processed == 0 {
		t.Errorf("the pages said %d processed, want at most the 2000 deleted (those of a failed request are not said)", processed)
	}
}

// TestProcessUpdateMarker: an increment by selection, with a marker,
// through the same faults, is applied to every document the selection
// matches exactly once, and to no other; without the marker it is
// refused; and an assignment, safe to repeat and so without a marker,
// is applied twice to some documents through the same faults: what an
// increment without a marker would be.
func TestProcessUpdateMarker(t *testing.T) {
	t.Parallel()
	inc := json.RawMessage(`{"fields":{"n":{"increment":1}}}`)
	if _, err := New(Config{URL: "http://localhost", Cluster: "music", Selection: "true",
		Process: &Process{Update: inc, Namespace: "music", DocumentType: "music"}}); !errors.Is(err, ErrUnsafeUpdate) || !strings.Contains(err.Error(), "marker") {
		t.Errorf("an increment without a marker: %v, want ErrUnsafeUpdate", err)
	}
	srv := visittest.New(t, 4000, 64, visittest.ChunkFaults)
	process(t, Config{URL: srv.URL, Cluster: "music", Slices: 4, Selection: "music.n < 3000",
		Process: &Process{Update: inc, Namespace: "music", DocumentType: "music", Marker: "run", Run: "r1"}})
	updates := srv.Updates()
	for d := range 4000 {
		if want := map[bool]int{true: 1}[d < 3000]; updates[d] != want {
			t.Fatalf("document %d updated %d times, want %d", d, updates[d], want)
		}
	}

	srv = visittest.New(t, 4000, 64, visittest.ChunkFaults)
	process(t, Config{URL: srv.URL, Cluster: "music", Slices: 4, Selection: "music.n < 3000",
		Process: &Process{Update: json.RawMessage(`{"fields":{"tag":{"assign":"x"}}}`), Namespace: "music", DocumentType: "music"}})
	twice := 0
	for _, k := range srv.Updates() {
		if k > 1 {
			twice++
		}
	}
	if twice == 0 {
		t.Error("no document assigned twice without a marker: the faults do not test the marker")
	}
}

// TestProcessRefused: a selection the server cannot parse ends the run at
// once with its message; a update without fields is refused by New.
func TestProcessRefused(t *testing.T) {
	t.Parallel()
	srv := visittest.New(t, 100, 8, nil)
	c, err := New(Config{URL: srv.URL, Cluster: "music", Slices: 4, Selection: "music.n ~ 3", Process: &Process{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Visit(t.Context(), Progress{}, func(Page) error { return nil })
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !strings.Contains(se.Message, "Could not parse document selection") || srv.Deleted() != 0 {
		t.Errorf("Visit: %v, %d deleted; want the server's 400 and nothing deleted", err, srv.Deleted())
	}
	for _, u := range []string{`{"n":{"increment":1}}`, `[]`, `{"fields":{"n":1}}`, `{"fields":{"n":{"incrment":1}}}`} {
		if _, err := New(Config{URL: srv.URL, Cluster: "music", Selection: "true",
			Process: &Process{Update: json.RawMessage(u), Namespace: "music", DocumentType: "music"}}); err == nil {
			t.Errorf("update %s: accepted", u)
		}
	}
}

// TestProcessMarkerGuard: with a marker, the selection must stand on its
// own before "(S) and TYPE.MARKER != RUN" is joined to it: one that
// closes a parenthesis it did not open ("true) or (true" would select the
// documents already marked, and apply the increment again) or leaves a
// parenthesis or a string open is refused by New, before any request;
// parentheses and quotes inside string literals are the literal's.
func TestProcessMarkerGuard(t *testing.T) {
	t.Parallel()
	var requests int
	srv := visittest.New(t, 100, 8, func(*http.Request, int) int { requests++; return 0 })
	inc := json.RawMessage(`{"fields":{"n":{"increment":1}}}`)
	newWith := func(sel string) error {
		_, err := New(Config{URL: srv.URL, Cluster: "music", Selection: sel,
			Process: &Process{Update: inc, Namespace: "music", DocumentType: "music", Marker: "run", Run: "r1"}})
		return err
	}
	for _, sel := range []string{"true) or (true", "(true", `music.s == "x`, `music.s == 'x) or (true`, "true)", ") or (", `music.s == "a\"`} {
		if err := newWith(sel); err == nil || !strings.Contains(err.Error(), "marker's condition") {
			t.Errorf("selection %q: New() = %v, want it refused", sel, err)
		}
	}
	for _, sel := range []string{"true", "(music.n < 3) or (music.n > 9)", `music.s == ")"`, `music.s == '(' and music.t == "x'y)"`, `music.s == "a\")"`, `music.s == 'it\'s ('`} {
		if err := newWith(sel); err != nil {
			t.Errorf("selection %q: New() = %v, want it taken", sel, err)
		}
	}
	if requests != 0 {
		t.Errorf("%d requests: want none", requests)
	}
	// Without a marker there is nothing to join: the server judges it.
	if _, err := New(Config{URL: srv.URL, Cluster: "music", Selection: "true) or (true", Process: &Process{}}); err != nil {
		t.Errorf("a delete: New() = %v, want the selection left to the server", err)
	}
}
