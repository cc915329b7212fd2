// Command halfdown feeds a loopback server that answers 40 % 503 and 10 %
// 500 for -for, through package feed with its defaults, and prints the
// operations ended and the three longest stretches in which none ended:
// the breaker, opened again and again by such a server, must not silence
// the feed for seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
)

func main() {
	dur := flag.Duration("for", 20*time.Second, "")
	flag.Parse()
	srv := feedtest.NewServer(func(*http.Request, int) int {
		switch x := rand.Float64(); {
		case x < 0.4:
			return 503
		case x < 0.5:
			return 500
		}
		return 0
	})
	defer srv.Close()
	c, err := feed.New(feed.Config{URL: srv.URL})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var mu sync.Mutex
	var ends []time.Time
	start := time.Now()
	ops := func(yield func(feed.Operation, error) bool) {
		for i := 0; ; i++ {
			if !yield(feed.Operation{Kind: feed.Put, ID: fmt.Sprintf("id:a:b::%d", i), Fields: []byte(`{}`)}, nil) {
				return
			}
		}
	}
	_ = c.Feed(ctx, ops, func(feed.Operation, feed.Result, error) {
		mu.Lock()
		ends = append(ends, time.Now())
		mu.Unlock()
	})
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var gaps []time.Duration
	prev := start
	for _, e := range ends {
		gaps = append(gaps, e.Sub(prev))
		prev = e
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] > gaps[j] })
	fmt.Printf("ended %d, longest stretches with none ending %v, stats %+v\n", len(ends), gaps[:min(3, len(gaps))], c.Stats())
}
