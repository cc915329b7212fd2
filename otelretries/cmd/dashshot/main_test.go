package main

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed32e55400/retries/visit/visittest"
)

// TestRunEndsWhenTheFeedStops: a copy whose feed stops at once (the
// destination's certificate is not trusted) ends with the feed's error
// though the visit has more documents than the queue between them holds;
// the visit waited on that queue for ever.
func TestRunEndsWhenTheFeedStops(t *testing.T) {
	t.Parallel()
	from := visittest.New(t, 2000, 16, nil)
	to := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	to.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused
	to.StartTLS()
	t.Cleanup(to.Close)
	out := filepath.Join(t.TempDir(), "dash.svg")
	err := run(from.URL, to.URL, "../../dashboard/retries.json", out, "", 10*time.Millisecond)
	if err == nil || !strings.HasPrefix(err.Error(), "feed: ") {
		t.Fatalf("run = %v, want the feed's error", err)
	}
}
