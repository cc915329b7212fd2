// Command pacedfloor is a measuring aid, not part of the library: the
// plainest paced feeder net/http allows, to price what pacing costs a Go
// HTTP client on this machine with no retry library in the way. It reads
// the arena's feed file (JSON lines of Vespa puts), starts one POST per
// document at a fixed -rate on a shared HTTP/1.1 transport (-batch of them
// together, every -batch/-rate seconds), or with -rate 0 from -workers
// goroutines as fast as they go, over HTTP/1.1 or (-h2) HTTP/2, and sends a
// document again 10 ms after a 429 or a 503, so that every document is
// stored. Run it under the arena:
//
//	arena -rate 1000 -fault 0 -reset 0 -docs 10000 -- pacedfloor -rate 1000 -url '$ARENA_URL' '$ARENA_DOCS'
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "the endpoint")
	rate := flag.Float64("rate", 1000, "documents started per second")
	batch := flag.Int("batch", 1, "documents started together, every batch/rate")
	workers := flag.Int("workers", 0, "with -rate 0: this many requests in flight, as fast as they go")
	h2 := flag.Bool("h2", false, "HTTP/2 without TLS (prior knowledge), for arena -h2")
	flag.Parse()
	if *url == "" || flag.NArg() != 1 || *rate < 0 || *batch < 1 || (*rate == 0) != (*workers > 0) {
		fmt.Fprintln(os.Stderr, "usage: pacedfloor -url URL [-rate R [-batch B] | -rate 0 -workers N] [-h2] FILE")
		os.Exit(2)
	}
	docs, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pacedfloor:", err)
		os.Exit(1)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	if *h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	send := func(d doc) {
		if !put(client, *url, d, 10*time.Millisecond) {
			mu.Lock()
			failed++
			mu.Unlock()
		}
	}
	if *rate == 0 {
		next := make(chan doc)
		for range *workers {
			wg.Go(func() {
				for d := range next {
					send(d)
				}
			})
		}
		for _, d := range docs {
			next <- d
		}
		close(next)
	} else {
		gap := time.Duration(float64(time.Second) / *rate)
		start := time.Now()
		for i, d := range docs {
			time.Sleep(time.Until(start.Add(time.Duration(i / *batch * *batch) * gap)))
			wg.Go(func() { send(d) })
		}
	}
	wg.Wait()
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "pacedfloor: %d documents failed\n", failed)
		os.Exit(1)
	}
}

type doc struct {
	path string
	body []byte
}

// read returns the documents of the feed file at name.
func read(name string) ([]doc, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var docs []doc
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var op struct {
			Put    string          `json:"put"`
			Fields json.RawMessage `json:"fields"`
		}
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, err
		}
		// id:namespace:doctype::user-id
		parts := strings.SplitN(op.Put, ":", 5)
		if len(parts) != 5 {
			return nil, fmt.Errorf("bad id %q", op.Put)
		}
		body, _ := json.Marshal(map[string]json.RawMessage{"fields": op.Fields})
		docs = append(docs, doc{path: "/document/v1/" + parts[1] + "/" + parts[2] + "/docid/" + parts[4], body: body})
	}
	return docs, sc.Err()
}

// put sends d until it is stored, sending it again pause after any other
// answer or an error, at most 100 times.
func put(c *http.Client, url string, d doc, pause time.Duration) bool {
	for range 100 {
		resp, err := c.Post(url+d.path, "application/json", bytes.NewReader(d.body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(pause)
	}
	return false
}
