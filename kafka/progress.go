package kafka

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// progress writes a progress report to the log.
func (m *member) progress() {
	lags := m.lags()
	lag := int64(0)
	for _, n := range lags {
		lag += n
	}
	if !m.cfg.ProgressJSON {
		line := fmt.Sprintf("retries-kafka: fed %d, dead-lettered %d, commits %d, lag %d", m.fed.Load(), m.dead.Load(), m.commits.Load(), lag)
		if cause, d := m.brokers.state(); cause != "" {
			line = fmt.Sprintf("retries-kafka: fed %d, dead-lettered %d, commits %d, lag unknown: no broker reached for %v (%s)",
				m.fed.Load(), m.dead.Load(), m.commits.Load(), d.Round(time.Second), cause)
			if m.maxOutage() > 0 {
				line += fmt.Sprintf("; stopping in %v (-max-outage)", max(m.maxOutage()-d, 0).Round(time.Second))
			}
		}
		fmt.Fprintln(m.log, line)
		return
	}
	parts := map[string]int64{}
	for p, n := range lags {
		parts[strconv.Itoa(int(p))] = n
	}
	b, _ := json.Marshal(map[string]any{"kafka.fed": m.fed.Load(), "kafka.deadlettered": m.dead.Load(),
		"kafka.commits": m.commits.Load(), "kafka.lag": lag, "kafka.lag.partitions": parts})
	fmt.Fprintf(m.log, "%s\n", b)
}

// lag returns the records of the member's partitions not committed, as of
// their last fetch.
func (m *member) lag() int64 {
	n := int64(0)
	for _, l := range m.lags() {
		n += l
	}
	return n
}

// lags returns the lag of each of the member's partitions: its records
// not committed, to its end as of its last fetch, as the owner last
// published it.
func (m *member) lags() map[int32]int64 {
	if l := m.lagsNow.Load(); l != nil {
		return *l
	}
	return map[int32]int64{}
}
