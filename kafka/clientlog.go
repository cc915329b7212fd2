package kafka

import (
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientLog is the Kafka client's logger: its warnings and errors, on the
// member's log, as "retries-kafka: kafka client: MESSAGE; KEY: VALUE, …",
// but for a broker it cannot reach, which brokerHealth says once in its
// own words rather than at each dial.
type clientLog struct{ w io.Writer }

func (clientLog) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l clientLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > kgo.LogLevelWarn || msg == "unable to open connection to broker" {
		return
	}
	var b strings.Builder
	b.WriteString("retries-kafka: kafka client: ")
	b.WriteString(msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		if i == 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v: %v", keyvals[i], keyvals[i+1])
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(l.w, b.String())
}
