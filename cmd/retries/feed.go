package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/cmd/retries/internal/feed"
)

// The feed command's choices; the engine is package feed.
const (
	// maxFeedConcurrency bounds -concurrency, maxFeedConnections
	// -connections.
	maxFeedConcurrency = 4096
	maxFeedConnections = 4096
	// feedTimeout bounds one operation, its waits and retries included.
	feedTimeout = 2 * time.Minute
	// feedAttemptTimeout bounds one request until its response header.
	feedAttemptTimeout = 30 * time.Second
	// feedGrace is how long an interrupted feed waits for the operations in
	// flight before it cancels them.
	feedGrace = 5 * time.Second
	// Retries on the outer (DocV1) layer may number at most 10 % of the
	// operations plus 5 a second (50 in any 10 s), so that an outage costs
	// at most about 1.1 requests per document beyond the first 50 retries.
	// 429s, retried by the inner layer, are paced by the limiter instead.
	feedBudgetRatio     = 0.1
	feedBudgetPerSecond = 5
)

// headerFlag collects -header 'Name: value' flags. Its String names the
// headers without their values, which may be secrets.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string {
	if f == nil || len(f.h) == 0 {
		return ""
	}
	names := make([]string, 0, len(f.h))
	for n := range f.h {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return errors.New("want 'Name: value'")
	}
	if strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("header %s: the value holds a line break", name)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, value)
	return nil
}

// feedOuter is the outer layer of a feed: DocV1, but waiting U(0, 0.2 s)
// then U(0, 0.4 s) instead of 1 s then 2 s. The retry budget bounds what
// retries cost a struggling server, and the limiter paces the load, so a
// 503 or a reset on one of the last documents need not hold up the end of
// a feed for seconds. retries.DocV1 itself keeps pyvespa's numbers.
var feedOuter = retries.DocV1.Copy(retries.WithWait(retries.WaitRandomExponential(
	retries.Exponential{Multiplier: 200 * time.Millisecond, Max: 2 * time.Second})))

// feedFlags are the flags of the feed command.
type feedFlags struct {
	url                      string
	concurrency, connections int
	http2, quiet             bool
	timeout                  time.Duration
	header                   headerFlag
}

// addFeedFlags defines the feed command's flags on fs.
func addFeedFlags(fs *flag.FlagSet, f *feedFlags) {
	fs.StringVar(&f.url, "url", "", "the document/v1 endpoint, such as http://localhost:8080 (required)")
	intVar(fs, &f.concurrency, "concurrency", 0, 0, maxFeedConcurrency, "`N` requests in flight, fixed; 0: the adaptive limiter decides")
	intVar(fs, &f.connections, "connections", 0, 0, maxFeedConnections, "`N` connections per host; 0: as many as needed")
	fs.BoolVar(&f.http2, "http2", false, "HTTP/2 without TLS on http URLs (prior knowledge)")
	fs.DurationVar(&f.timeout, "timeout", feedTimeout, "time limit of each operation, its retries included; 0: none")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines")
	fs.Var(&f.header, "header", "`Name: value` sent with every request (repeatable); never printed")
}

// runFeed is the feed command.
func runFeed(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("feed")
	var f feedFlags
	addFeedFlags(fs, &f)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case f.url == "":
		return usageErrorf("feed: -url is required")
	case len(pos) == 0:
		return usageErrorf("feed: name a FILE, or - for stdin")
	case len(pos) > 1:
		return usageErrorf("feed: unexpected argument %q", pos[1])
	case f.timeout < 0:
		return usageErrorf("feed: -timeout %v: must not be negative", f.timeout)
	}
	in := stdin
	if pos[0] != "-" {
		file, err := os.Open(pos[0])
		if err != nil {
			return usageErrorf("feed: %v", err)
		}
		defer file.Close()
		in = file
	}
	cfg := feed.Config{
		URL: f.url, Header: f.header.h, Concurrency: f.concurrency, Connections: f.connections, HTTP2: f.http2,
		Timeout: f.timeout, AttemptTimeout: feedAttemptTimeout, Grace: feedGrace,
		Outer: feedOuter, Inner: retries.Throttle,
		Budget:   retries.NewBudget(feedBudgetRatio, feedBudgetPerSecond),
		Progress: time.Second, Log: stderr,
	}
	if f.quiet {
		cfg.Progress = 0
	}
	fd, err := feed.New(cfg)
	if err != nil {
		return usageErrorf("feed: -url: %v", err)
	}
	res := fd.Run(ctx, in)
	if _, err := stdout.Write(res.Summary()); err != nil {
		return err
	}
	if !res.Complete() {
		return errSilent
	}
	return nil
}

// errSilent makes the command exit 1 without a message of its own: the
// feed has reported each failure already.
var errSilent = errors.New("")
