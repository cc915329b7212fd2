package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// TestDeadBroker: a member whose brokers cannot be reached says so at
// once, with the broker and the cause, reports the lag as unknown instead
// of 0, and stops with exit 4 once -max-outage has passed, the records
// staying in Kafka. It used to log a warning about DescribeConfigs and
// then "lag 0" every 10 s, for ever.
func TestDeadBroker(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	srv := feedtest.New(t, nil)
	var stdout, stderr lockedBuffer
	code := run(t.Context(), context.Background(), []string{"-brokers", dead, "-topic", "docs", "-group", "g", "-url", srv.URL,
		"-failed", t.TempDir() + "/failed", "-max-outage", "2s", "-progress", "500ms"}, &stdout, &stderr)
	out := stderr.String()
	lines := strings.Split(out, "\n")
	if code != 4 || !strings.HasPrefix(lines[0], "retries-kafka: cannot reach the brokers: "+dead+": ") || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("exit %d, stderr:\n%s\nwant 4, first the broker and why it cannot be reached", code, out)
	}
	if strings.Contains(out, "lag 0") || !strings.Contains(out, "lag unknown: no broker reached for") {
		t.Errorf("the progress lines report a lag though no broker was reached:\n%s", out)
	}
	if !strings.Contains(out, "retries-kafka: stopped: no broker reached for longer than -max-outage (2s)") {
		t.Errorf("stderr does not say why it stopped:\n%s", out)
	}
}

// TestGroupRefused: a -session-timeout below the brokers' minimum exits 2
// at once, saying why, where the member tried to join again for ever.
func TestGroupRefused(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv := feedtest.New(t, nil)
	var stdout, stderr lockedBuffer
	code := run(t.Context(), context.Background(), []string{"-brokers", c.ListenAddrs()[0], "-topic", "docs", "-group", "g", "-url", srv.URL,
		"-failed", t.TempDir() + "/failed", "-session-timeout", "1s"}, &stdout, &stderr)
	if out := stderr.String(); code != 2 || !strings.Contains(out, "retries-kafka: the group refused the member: ") || !strings.Contains(out, "INVALID_SESSION_TIMEOUT") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2 and the brokers' refusal", code, out)
	}
}
