package resume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/seed32e55400/retries/resume"
	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// An increment of the documents a selection matches, with a checkpoint:
// the run's id, which the marker field "run" receives in each document
// updated, is on disk before the first request, so that a run resumed
// after a crash skips what it updated; run again after it ended, it has
// nothing to do.
func ExampleBulk() {
	srv := visittest.NewServer(1000, 16, nil) // documents id:music:music::N with {"n": N}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "bulk")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	of := resume.BulkOf{Cluster: "music", Selection: "music.n < 100", Update: json.RawMessage(`{"fields":{"n":{"increment":1}}}`),
		Namespace: "music", DocumentType: "music", Marker: "run", URLs: []string{srv.URL}}
	checkpoint := filepath.Join(dir, "update.json")

	updateOnce := func() {
		b, err := resume.OpenBulk(checkpoint, of, 4)
		if err != nil {
			log.Fatal(err)
		}
		defer b.Close()
		if b.Start().Complete {
			fmt.Println("the checkpoint says the update is complete")
			return
		}
		c, err := visit.New(visit.Config{URLs: of.URLs, Cluster: of.Cluster, Selection: of.Selection, Slices: 4,
			Process: &visit.Process{Update: of.Update, Namespace: of.Namespace, DocumentType: of.DocumentType, Marker: of.Marker, Run: b.RunID()}})
		if err != nil {
			log.Fatal(err)
		}
		if err := b.Run(context.Background(), c, nil); err != nil {
			log.Fatal(err)
		}
		fmt.Println(b.Processed(), "documents updated")
	}
	updateOnce()
	updateOnce()
	// Output:
	// 100 documents updated
	// the checkpoint says the update is complete
}
