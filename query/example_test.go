package query_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/seed32e55400/retries/query"
)

// This example sends a query with 200 ms to answer it: the container gets
// what is left less the margin as its timeout, and the result comes back
// typed, partial coverage and its reason included.
func ExampleClient_Search() {
	container := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A content node was too slow: Vespa answers with what it has.
		fmt.Fprint(w, `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},
			"coverage":{"coverage":50,"documents":5,"full":false,"nodes":1,"results":1,"resultsFull":0,
				"degraded":{"match-phase":false,"timeout":true,"adaptive-timeout":false,"non-ideal-state":false}},
			"children":[{"id":"id:music:music::1","relevance":0.9,"source":"music","fields":{"title":"Hey Jude"}}]}}`)
	}))
	defer container.Close()

	c, err := query.New(query.Config{URLs: []string{container.URL}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := c.Search(ctx, query.Query{Params: url.Values{"yql": {"select * from music where true"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.TotalCount, res.Hits[0].ID, string(res.Hits[0].Fields))
	fmt.Println(res.Complete(), res.Coverage.Coverage, res.Coverage.Degraded.Reasons(), res.Requests)
	// Output:
	// 1 id:music:music::1 {"title":"Hey Jude"}
	// false 50 [timeout] 1
}
