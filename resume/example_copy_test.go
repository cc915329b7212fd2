package resume_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// A copy from one cluster to another with a checkpoint: run again after a
// crash, or a SIGKILL, it goes on from the checkpoint, with no document
// lost; run again after it ended, it has nothing to do.
func ExampleCopier() {
	src := visittest.NewServer(1000, 16, nil) // a document/v1 API holding 1 000 documents
	defer src.Close()
	dst := feedtest.NewServer(nil) // one that takes them
	defer dst.Close()
	dir, err := os.MkdirTemp("", "copy")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	checkpoint := filepath.Join(dir, "copy.json")

	copyOnce := func() {
		of := resume.CopyOf{Cluster: "music", From: []string{src.URL}, To: []string{dst.URL}}
		c, err := resume.OpenCopy(checkpoint, of, 4)
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close() // lets the checkpoint go, for the next run
		if c.Start().Complete {
			fmt.Println("the checkpoint says the copy is complete")
			return
		}
		// Pages, so that the feed sets the pace; Resumable, so that what
		// it did not send is left to the next run.
		from, err := visit.New(visit.Config{URLs: of.From, Cluster: of.Cluster, Slices: 4, Pages: true, WantedDocumentCount: 128})
		if err != nil {
			log.Fatal(err)
		}
		to, err := feed.New(feed.Config{URLs: of.To, Resumable: true})
		if err != nil {
			log.Fatal(err)
		}
		defer to.Close()
		r, err := c.Run(context.Background(), from, to, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("complete: %v, %d documents acknowledged\n", r.Complete(), c.Stats().Acknowledged)
	}
	copyOnce()
	copyOnce()
	fmt.Println(len(dst.Applied()), "documents in the destination")
	// Output:
	// complete: true, 1000 documents acknowledged
	// the checkpoint says the copy is complete
	// 1000 documents in the destination
}
