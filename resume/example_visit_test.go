package resume_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// A visit of a corpus to a file with a checkpoint: run again after a
// crash, it cuts the file back to what the checkpoint covers and goes on,
// each document written once; run again after it ended, it has nothing to
// do.
func ExampleVisitor() {
	src := visittest.NewServer(500, 8, nil) // a document/v1 API holding 500 documents
	defer src.Close()
	dir, err := os.MkdirTemp("", "visit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	of := resume.VisitOf{Cluster: "music", URLs: []string{src.URL}, Output: filepath.Join(dir, "docs.jsonl")}
	checkpoint := filepath.Join(dir, "visit.json")

	visitOnce := func() {
		v, err := resume.OpenVisit(checkpoint, of, 4)
		if err != nil {
			log.Fatal(err)
		}
		defer v.Close()
		if v.Start().Complete {
			fmt.Println("the checkpoint says the visit is complete")
			return
		}
		c, err := visit.New(visit.Config{URLs: of.URLs, Cluster: of.Cluster, Slices: 4})
		if err != nil {
			log.Fatal(err)
		}
		if err := v.Run(context.Background(), c, nil); err != nil {
			log.Fatal(err)
		}
		fmt.Println(v.Documents(), "documents in", filepath.Base(of.Output))
	}
	visitOnce()
	visitOnce()
	// Output:
	// 500 documents in docs.jsonl
	// the checkpoint says the visit is complete
}
