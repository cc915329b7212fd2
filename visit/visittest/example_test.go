package visittest_test

import (
	"context"
	"fmt"

	"github.com/seed32e55400/retries/visit"
	"github.com/seed32e55400/retries/visit/visittest"
)

// A program, not only a test, can start a Server: to try retries visit or
// retries copy by hand against it, or to visit it as here.
func ExampleNewServer() {
	srv := visittest.NewServer(1000, 16, nil)
	defer srv.Close()
	c, err := visit.New(visit.Config{URL: srv.URL, Cluster: "music", Slices: 4})
	if err != nil {
		panic(err)
	}
	docs := 0
	p, err := c.Visit(context.Background(), visit.Progress{}, func(pg visit.Page) error {
		docs += len(pg.Documents)
		return nil
	})
	fmt.Println(docs, p.Complete(), err)
	// Output: 1000 true <nil>
}
