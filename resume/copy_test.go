package resume_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// TestCopierInterrupted: a copy interrupted after 1 000 puts, resumed from
// its checkpoint, puts every document of the source; what it puts twice
// is at most what was queued and in flight past the checkpoint (the
// queue's 512 and a page a slice), and the second run counts the first's
// documents as done before.
func TestCopierInterrupted(t *testing.T) {
	t.Parallel()
	const docs, slices = 3000, 4
	src := visittest.New(t, docs, 32, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var puts atomic.Int64
	dst := feedtest.New(t, func(r *http.Request, _ int) int {
		if puts.Add(1) == 1000 {
			cancel()
		}
		return 0
	})
	path := filepath.Join(t.TempDir(), "copy.json")
	of := resume.CopyOf{Cluster: "music", From: []string{src.URL}, To: []string{dst.URL}}
	run := func(ctx context.Context) (resume.CopyResult, resume.CopyStats) {
		c, err := resume.OpenCopy(path, of, slices)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		from, err := visit.New(visit.Config{URLs: of.From, Cluster: "music", Slices: slices, Pages: true, WantedDocumentCount: 128})
		if err != nil {
			t.Fatal(err)
		}
		to, err := feed.New(feed.Config{URLs: of.To, Resumable: true})
		if err != nil {
			t.Fatal(err)
		}
		defer to.Close()
		r, err := c.Run(ctx, from, to, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r, c.Stats()
	}
	r, first := run(ctx)
	if r.Complete() || first.Done < 1 || first.Done > first.Acknowledged {
		t.Fatalf("the interrupted copy: complete %v, %+v; want it incomplete, its checkpoint past some acknowledged documents", r.Complete(), first)
	}
	r, second := run(t.Context())
	if !r.Complete() || second.Before != first.Done || second.Done != docs {
		t.Fatalf("the resumed copy: complete %v, %+v; want it complete, resumed from %d", r.Complete(), second, first.Done)
	}
	seen := map[string]int{}
	for _, a := range dst.Applied() {
		seen[strings.Fields(a)[1]]++
	}
	if len(seen) != docs {
		t.Errorf("%d documents put, want %d", len(seen), docs)
	}
	if twice := len(dst.Applied()) - docs; twice > 512+slices*128 {
		t.Errorf("%d documents put twice, want at most %d", twice, 512+slices*128)
	} else {
		t.Logf("interrupted after %d acknowledged, %d done in the checkpoint; %d put twice", first.Acknowledged, first.Done, twice)
	}
}
