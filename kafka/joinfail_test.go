package kafka

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/feed/feedtest"
)

// lineWriter is a log that signals the first line holding want.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestGroupJoinFailureSaid: a member whose session timeout the brokers
// refuse (below their minimum, 6 s by default) cannot join its group: it
// stops at once with ErrGroupRefused and the brokers' error, and its log
// has the client's line, where it used to try again for ever, saying
// "fetching /0: …" each time.
func TestGroupJoinFailureSaid(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, opsTopic, deadTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	log := &lineWriter{want: "join group failed", seen: make(chan struct{})}
	v := feedtest.New(t, nil)
	ctx := t.Context()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, ctx, Config{Brokers: c.ListenAddrs(), Topic: opsTopic, Group: "g", FailedTopic: deadTopic,
			SessionTimeout: time.Second, Log: log, Feed: feed.Config{URLs: []string{v.URL}}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrGroupRefused) || !errors.Is(err, kerr.InvalidSessionTimeout) {
			t.Errorf("Run: %v, want ErrGroupRefused with the brokers' error", err)
		}
	case <-time.After(time.Minute): // a guard, not a measure: the member stops at its first join
		t.Fatalf("the member did not stop:\n%s", log.String())
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !strings.Contains(log.buf.String(), "retries-kafka: kafka client: ") || !strings.Contains(log.buf.String(), "INVALID_SESSION_TIMEOUT") {
		t.Errorf("the log does not name the client and the brokers' error:\n%s", log.buf.String())
	}
}
