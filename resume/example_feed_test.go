package resume_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/resume"
)

// A feed of a file with a checkpoint and failed files: run again after a
// crash, or a SIGKILL, it goes on from the checkpoint, sending again only
// what was in flight and no increment twice; run again after it ended, it
// has nothing to feed.
func ExampleFileFeed() {
	dst := feedtest.NewServer(nil) // a document/v1 API that applies what it gets
	defer dst.Close()
	dir, err := os.MkdirTemp("", "feed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, `{"put":"id:music:music::%d","fields":{"title":"t%d"}}`+"\n", i, i)
	}
	input := filepath.Join(dir, "docs.jsonl")
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}

	feedOnce := func() {
		in, err := os.Open(input)
		if err != nil {
			log.Fatal(err)
		}
		defer in.Close()
		ff, err := resume.OpenFileFeed(resume.FileFeedConfig{Input: in,
			Checkpoint: filepath.Join(dir, "feed.json"), Failed: filepath.Join(dir, "failed.jsonl")})
		if err != nil {
			log.Fatal(err)
		}
		defer ff.Close() // lets the checkpoint go, for the next run
		if ff.Start().Complete {
			fmt.Println("the checkpoint says every operation was fed or reported")
		}
		cfg, err := ff.Configure(feed.Config{URLs: []string{dst.URL}})
		if err != nil {
			log.Fatal(err)
		}
		c, err := feed.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		r, err := ff.Run(context.Background(), c)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("complete: %v; %d acknowledged, %d skipped as done before\n", r.Complete(), r.Report.Counts().Acknowledged, r.Skipped)
	}
	feedOnce()
	feedOnce()
	fmt.Println(len(dst.Applied()), "operations applied")
	// Output:
	// complete: true; 100 acknowledged, 0 skipped as done before
	// the checkpoint says every operation was fed or reported
	// complete: true; 0 acknowledged, 0 skipped as done before
	// 100 operations applied
}
