package feed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestFeedNoResponseStops: a URL whose port refuses connections, where
// the breaker alone would wait out MaxOutage, ends the feed once no
// request has had a response for FirstResponse; every operation is
// written to Failed.
func TestFeedNoResponseStops(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	var failed bytes.Buffer
	cfg := testFeedConfig(url, nil)
	cfg.MaxOutage = time.Hour
	cfg.FirstResponse = 100 * time.Millisecond
	cfg.Failed = &failed
	done := make(chan struct{})
	var res Report
	var stderr string
	go func() {
		defer close(done)
		res, _, stderr = runTestFeed(t, context.Background(), cfg, puts(50))
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the feed waits out MaxOutage")
	}
	if res.SetupError() == nil || !strings.Contains(stderr, "retries feed: stopping: no request got a response in 100ms (") {
		t.Errorf("setup error %v; stderr:\n%s", res.SetupError(), stderr)
	}
	if n := bytes.Count(failed.Bytes(), []byte("\n")); n != 50 {
		t.Errorf("%d operations written, want 50", n)
	}
}

// TestFeedQuietInputNotStopped: a feed whose input is quiet for longer
// than FirstResponse sends nothing meanwhile, and is not stopped for it.
// The quiet passes in synctest's time; the request goes to a real server.
func TestFeedQuietInputNotStopped(t *testing.T) {
	t.Parallel()
	srv := feedtest.New(t, nil)
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			time.Sleep(time.Minute) // the input is quiet for a minute
			fmt.Fprintln(pw, `{"put":"id:a:b::1","fields":{}}`)
			pw.Close()
		}()
		cfg := testFeedConfig(srv.URL, nil)
		cfg.FirstResponse = 30 * time.Second
		f, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := feedReport(f, context.Background(), pr)
		if !res.Complete() || res.SetupError() != nil {
			t.Errorf("complete %v, setup error %v; want the quiet input fed", res.Complete(), res.SetupError())
		}
		f.transport.CloseIdleConnections()
	})
}
