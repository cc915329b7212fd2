package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBrokersOut is why a member stopped when no broker could be reached
// for longer than the feed's MaxOutage; Run's error matches it. The
// records stay in Kafka.
var ErrBrokersOut = errors.New("kafka: no broker reached for longer than -max-outage")

// brokerHealth is whether the member's client reaches the brokers: from a
// connection that failed to the next that succeeds. It is a kgo hook; its
// changes are logged once each, so that a member pointed at a dead broker
// says so at once instead of reporting a lag of 0.
type brokerHealth struct {
	log io.Writer

	mu      sync.Mutex
	failing bool
	since   time.Time
	cause   string
}

var _ kgo.HookBrokerConnect = (*brokerHealth)(nil)

// OnBrokerConnect notes a connection to a broker, made or failed.
func (h *brokerHealth) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.mu.Lock()
	was := h.failing
	switch {
	case err != nil:
		h.cause = fmt.Sprintf("%s: %v", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), err)
		if !was {
			h.failing, h.since = true, time.Now()
		}
	default:
		h.failing = false
	}
	cause, since := h.cause, h.since
	h.mu.Unlock()
	switch {
	case err != nil && !was:
		fmt.Fprintf(h.log, "retries-kafka: cannot reach the brokers: %s; trying again, the records staying in Kafka\n", cause)
	case err == nil && was:
		fmt.Fprintf(h.log, "retries-kafka: reached broker %s after %v\n", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), time.Since(since).Round(100*time.Millisecond))
	}
}

// state returns why no broker was reached and since how long, or "", 0.
func (h *brokerHealth) state() (string, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return "", 0
	}
	return h.cause, time.Since(h.since)
}
