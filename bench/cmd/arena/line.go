package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// measure is what a run leaves for its line.
type measure struct {
	c        config
	runs     []feederRun
	elapsed  time.Duration
	statuses map[string]map[int]int // by method, then status
	st       *store
	vs       *visitStore
	clock    *runClock
	at, dur  time.Duration // the outage
}

// capacity is the documents a second the server can take at t after the
// start: nginx's rate, or K slots over the service time, times the
// phase's factor; 0 in an outage.
func (m measure) capacity(t time.Duration) float64 {
	if m.dur > 0 && t >= m.at && t < m.at+m.dur {
		return 0
	}
	base := float64(m.c.rate)
	if m.c.inflight > 0 && m.c.service > 0 && !m.c.visit && !m.c.copy {
		base = float64(m.c.inflight) / m.c.service.Seconds()
	}
	return base * factorAt(m.clock.phases, t)
}

// admitted is the capacity integrated over the run, nginx's burst included
// when nginx is what limits.
func (m measure) admitted() float64 {
	sum := 0.0
	for t := time.Duration(0); t < m.elapsed; t += tick {
		sum += m.capacity(t) * min(tick, m.elapsed-t).Seconds()
	}
	if m.c.inflight == 0 || m.c.service == 0 {
		sum += float64(m.c.burst)
	}
	return sum
}

// recovery is the time from the outage's end until acknowledgements are
// back at 0.9 of capacity over half a second, or -1.
func (m measure) recovery() float64 {
	line := m.st.timeline()
	const span = 50 // ticks: half a second
	for i := int((m.at + m.dur) / tick); i+span <= len(line); i++ {
		n, want := 0, 0.0
		for j := i; j < i+span; j++ {
			n += int(line[j])
			want += m.capacity(time.Duration(j)*tick) * tick.Seconds()
		}
		if float64(n) >= 0.9*want {
			return (time.Duration(i)*tick - m.at - m.dur).Seconds()
		}
	}
	return -1
}

// exit is the first exit status of the feeders that is not 0.
func (m measure) exit() int {
	for _, r := range m.runs {
		if r.exit != 0 {
			return r.exit
		}
	}
	return 0
}

// resources is the feeders' CPU, per 1000 documents, and peak memory.
func (m measure) resources() string {
	var cpu time.Duration
	var rss int64
	for _, r := range m.runs {
		cpu += r.cpu
		rss = max(rss, r.rssKB)
	}
	return fmt.Sprintf("cpu=%.2fs cpu/kdoc=%.0fms rss=%.0fMB", cpu.Seconds(), float64(cpu.Milliseconds())/float64(m.c.docs)*1000, float64(rss)/1024)
}

// requests counts the requests of the methods given (all if none), and
// says them by status.
func (m measure) requests(methods ...string) (n int, by string) {
	codes := map[int]int{}
	for method, s := range m.statuses {
		if len(methods) > 0 && !slices.Contains(methods, method) {
			continue
		}
		for code, k := range s {
			codes[code] += k
			n += k
		}
	}
	keys := make([]int, 0, len(codes))
	for code := range codes {
		keys = append(keys, code)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, code := range keys {
		parts[i] = fmt.Sprintf("%d:%d", code, codes[code])
	}
	return n, strings.Join(parts, " ")
}

// fairness is each feeder's documents a second over its own run, and
// Jain's index over them.
func (m measure) fairness() string {
	if len(m.runs) < 2 {
		return ""
	}
	var rates []string
	sum, squares := 0.0, 0.0
	for _, r := range m.runs {
		x := float64(r.docs) / r.elapsed.Seconds()
		rates = append(rates, strconv.FormatFloat(x, 'f', 0, 64))
		sum += x
		squares += x * x
	}
	return fmt.Sprintf(" per-feeder-docs/s=%s jain=%.3f", strings.Join(rates, ","), sum*sum/(float64(len(m.runs))*squares))
}

// outageFigures is the outage's part of a line.
func (m measure) outageFigures() string {
	if m.dur == 0 {
		return ""
	}
	return fmt.Sprintf(" outage-requests=%d recovery=%.1fs", m.st.outaged.Load(), m.recovery())
}

// feedLine is the line of a feed.
func (m measure) feedLine() string {
	stored, twice := m.st.counts()
	requests, by := m.requests()
	wasted := 0.0
	if requests > 0 {
		wasted = 100 * float64(requests-stored) / float64(requests)
	}
	return fmt.Sprintf("%-22s exit=%d docs=%d acked=%d lost=%d dup=%d elapsed=%.2fs goodput=%.3f docs/s=%.0f requests=%d (%s) wasted=%.1f%%%s%s %s",
		m.c.label, m.exit(), m.c.docs, stored, m.c.docs-stored, twice, m.elapsed.Seconds(), min(float64(stored)/m.admitted(), 1),
		float64(stored)/m.elapsed.Seconds(), requests, by, wasted, m.outageFigures(), m.fairness(), m.resources())
}

// copyLine is the line of a copy: the feed's figures over the puts, and
// the documents the store sent and the puts whose fields were not the
// document's.
func (m measure) copyLine() string {
	stored, twice := m.st.counts()
	puts, putsBy := m.requests("POST", "PUT")
	gets, getsBy := m.requests("GET")
	wasted := 0.0
	if puts+gets > 0 {
		wasted = 100 * float64(puts-stored+gets-m.statuses["GET"][200]) / float64(puts+gets)
	}
	return fmt.Sprintf("%-22s exit=%d docs=%d acked=%d lost=%d dup=%d corrupt=%d visited=%d elapsed=%.2fs goodput=%.3f docs/s=%.0f puts=%d (%s) visits=%d (%s) cut=%d wasted=%.1f%%%s %s",
		m.c.label, m.exit(), m.c.docs, stored, m.c.docs-stored, twice, m.st.corrupt.Load(), m.vs.sent.Load(), m.elapsed.Seconds(),
		min(float64(stored)/m.admitted(), 1), float64(stored)/m.elapsed.Seconds(), puts, putsBy, gets, getsBy, m.vs.cut.Load(),
		wasted, m.outageFigures(), m.resources())
}

// visitLine is the line of a visit: the feeders' outputs checked against
// the corpus.
func (m measure) visitLine(outs []string) (string, error) {
	seen := make([]int, m.c.docs)
	lines, bad := 0, 0
	for _, path := range outs {
		n, b, err := readExport(path, seen)
		if err != nil {
			return "", err
		}
		lines, bad = lines+n, bad+b
	}
	exported, dup := 0, 0
	for _, k := range seen {
		if k > 0 {
			exported++
			dup += k - 1
		}
	}
	requests, by := m.requests()
	wasted := 0.0
	if requests > 0 {
		wasted = 100 * float64(requests-m.statuses["GET"][200]) / float64(requests)
	}
	return fmt.Sprintf("%-22s exit=%d docs=%d exported=%d lost=%d dup=%d bad=%d elapsed=%.2fs docs/s=%.0f sent=%d requests=%d (%s) wasted=%.1f%% pages=%d streams=%d cut=%d%s %s",
		m.c.label, m.exit(), m.c.docs, exported, m.c.docs-exported, dup, bad, m.elapsed.Seconds(), float64(exported)/m.elapsed.Seconds(),
		m.vs.sent.Load(), requests, by, wasted, m.vs.pages.Load(), m.vs.streams.Load(), m.vs.cut.Load(), m.fairness(), m.resources()), nil
}

// readExport reads a feeder's output, JSON lines of documents ({"put": ID,
// "fields": …} or {"id": ID, "fields": …}), counting each document of the
// corpus in seen; it returns the lines read and those that are no document
// of the corpus with its fields.
func readExport(path string, seen []int) (lines, bad int, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		lines++
		var doc struct {
			Put, ID string
			Fields  json.RawMessage
		}
		if json.Unmarshal([]byte(text), &doc) != nil {
			bad++
			continue
		}
		id := doc.Put
		if id == "" {
			id = doc.ID
		}
		n, ok := corpusNumber(id)
		if !ok || n >= len(seen) || !sameFields(id, doc.Fields) {
			bad++
			continue
		}
		seen[n]++
	}
	return lines, bad, sc.Err()
}

// corpusNumber is N of id:music:music::N.
func corpusNumber(id string) (int, bool) {
	key, ok := strings.CutPrefix(id, "id:music:music::")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(key)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == key
}
