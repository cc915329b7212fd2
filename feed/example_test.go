package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// A Client sends single operations with Put, Update and Remove, and
// streams with Feed. Here it feeds a loopback server that resets the
// first connection: the put is sent again, and every operation is
// acknowledged.
func ExampleClient() {
	srv := feedtest.NewServer(func(_ *http.Request, n int) int {
		if n == 0 {
			return feedtest.Reset // the first request for each document
		}
		return 0
	})
	defer srv.Close()

	c, err := feed.New(feed.Config{URL: srv.URL})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	res, err := c.Put(ctx, "id:music:music::a-head-full-of-dreams", json.RawMessage(`{"title": "A Head Full of Dreams"}`))
	fmt.Println(res.Status, res.Attempts, err)

	input := `{"update": "id:music:music::a-head-full-of-dreams", "fields": {"year": {"assign": 2015}}}
{"remove": "id:music:music::ghost-stories"}`
	err = c.Feed(ctx, feed.Read(strings.NewReader(input)), func(op feed.Operation, res feed.Result, err error) {
		fmt.Println(op.Line, op.Kind, res.Status, err)
	})
	fmt.Println(err)
	// Unordered output:
	// 200 2 <nil>
	// 1 update 200 <nil>
	// 2 remove 200 <nil>
	// <nil>
}

// ReadFrom takes an input up at one of its elements, here the second of a
// JSON array, with the positions Read gave it.
func ExampleReadFrom() {
	input := "[\n{\"put\":\"id:music:music::1\",\"fields\":{}},\n{\"remove\":\"id:music:music::2\"},\n{\"remove\":\"id:music:music::3\"}\n]\n"
	var second feed.Operation
	n := 0
	for op, err := range feed.Read(strings.NewReader(input)) {
		if n++; err == nil && n == 2 {
			second = op
		}
	}
	for op, err := range feed.ReadFrom(strings.NewReader(input[second.Offset:]), second.Offset, second.Line, true) {
		fmt.Println(op.Kind, op.ID, "line", op.Line, "offset", op.Offset, err)
	}
	// Output:
	// remove id:music:music::2 line 3 offset 43 <nil>
	// remove id:music:music::3 line 4 offset 75 <nil>
}
