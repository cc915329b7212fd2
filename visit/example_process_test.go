package visit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// An increment of every document a selection matches, applied exactly
// once through the requests asked again: the marker field "run" is
// assigned the run's id, and the selection skips what it marks.
func ExampleProcess() {
	srv := visittest.NewServer(1000, 16, nil) // documents id:music:music::N with {"n": N}
	defer srv.Close()
	c, err := visit.New(visit.Config{URL: srv.URL, Cluster: "music", Slices: 4, Selection: "music.n < 100",
		Process: &visit.Process{Update: json.RawMessage(`{"fields":{"n":{"increment":1}}}`),
			Namespace: "music", DocumentType: "music", Marker: "run", Run: "2026-12-05-a"}})
	if err != nil {
		log.Fatal(err)
	}
	processed := 0
	p, err := c.Visit(context.Background(), visit.Progress{}, func(pg visit.Page) error {
		processed += pg.Processed // keep pg.Progress to resume from
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(processed, "documents updated; every slice done:", p.Complete())
	// Output: 100 documents updated; every slice done: true
}
