package resume_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// TestVisitorInterrupted: a visit to a file interrupted after 1 000
// documents, with a line appended by hand after it, resumed from its
// checkpoint: the output holds every document of the corpus once, the
// line appended is cut away, and the second run counts the documents
// written before.
func TestVisitorInterrupted(t *testing.T) {
	t.Parallel()
	const docs, slices = 3000, 4
	src := visittest.New(t, docs, 32, nil)
	dir := t.TempDir()
	of := resume.VisitOf{Cluster: "music", URLs: []string{src.URL}, Output: filepath.Join(dir, "docs.jsonl")}
	path := filepath.Join(dir, "visit.json")
	run := func(ctx context.Context, page func(visit.Page)) (*resume.Visitor, error) {
		v, err := resume.OpenVisit(path, of, slices)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		c, err := visit.New(visit.Config{URLs: of.URLs, Cluster: of.Cluster, Slices: slices})
		if err != nil {
			t.Fatal(err)
		}
		return v, v.Run(ctx, c, page)
	}
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	v, err := run(ctx, func(pg visit.Page) {
		if n += len(pg.Documents); n >= 1000 {
			cancel()
		}
	})
	if err == nil || v.Documents() < 1000 || v.Documents() >= docs {
		t.Fatalf("the interrupted visit: %v, %d documents; want an error part way", err, v.Documents())
	}
	f, err := os.OpenFile(of.Output, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"put":"id:by:hand::1","fields":{}}` + "\n")
	f.Close()

	v, err = run(t.Context(), nil)
	// The interrupted visit's checkpoint is not complete: this one resumes
	// it.
	if st := v.Start(); err != nil || !st.Resumed || st.Complete || v.Documents() != docs {
		t.Fatalf("the resumed visit: %v, %+v, %d documents; want resumed, not complete, and %d documents", err, st, v.Documents(), docs)
	}
	if from, to := v.Cut(); from <= to {
		t.Errorf("Cut() = %d, %d: want the appended line cut", from, to)
	}
	out, err := os.Open(of.Output)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var d struct{ Put string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		seen[d.Put]++
	}
	if len(seen) != docs || seen["id:by:hand::1"] != 0 {
		t.Errorf("%d documents in the output, want %d (and no line by hand)", len(seen), docs)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s written %d times", id, k)
		}
	}
}
