// Command arena measures a feeder against a real rate limiter: it starts a
// loopback document store with a real nginx in front of it, writes a feed
// file of Vespa puts, runs the feeder command given after --, and prints
// one line from the store's and nginx's own counts. It is this project's
// instrument for the figures in its docs; it needs nginx (apt-get install
// nginx-light).
//
//	go run ./cmd/arena -rate 500 -docs 3000 -- retries feed -url '$ARENA_URL' '$ARENA_DOCS'
//
// nginx admits -rate requests a second after a burst of -burst and answers
// 429 beyond; the store answers 503 to a share -fault of what nginx admits
// and resets the connection of a share -reset (nginx reports that as 502);
// -outage AT+DUR takes the server away for DUR from AT after the feeder
// starts, as -outage-kind says: the store answers 503 to everything (503),
// resets every connection (reset), or nginx is stopped and started again
// (down). The feeder gets the endpoint in $ARENA_URL and
// the feed file in $ARENA_DOCS, in its environment and expanded in its
// arguments.
//
// The line: the feeder's exit status; acked, lost and dup (documents the
// store stored, never stored, stored more than once); elapsed; goodput
// (documents stored over what nginx admits while the store is up, burst
// included: an outage's time has no capacity); the requests by status as nginx logged them; wasted (the
// share of requests that stored no document); and the feeder's CPU time.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	docs         int
	rate, burst  int
	fault, reset float64
	outage       string
	outageKind   string
	label        string
	limit        time.Duration
	seed         uint64
}

func main() {
	var c config
	flag.IntVar(&c.docs, "docs", 5000, "documents in the feed file")
	flag.IntVar(&c.rate, "rate", 500, "requests a second nginx admits; 429 beyond")
	flag.IntVar(&c.burst, "burst", 20, "nginx's burst (nodelay)")
	flag.Float64Var(&c.fault, "fault", 0.002, "share of admitted requests the store answers 503")
	flag.Float64Var(&c.reset, "reset", 0.0015, "share of admitted requests whose connection the store resets")
	flag.StringVar(&c.outage, "outage", "", "AT+DUR: from AT after the feeder starts, for DUR, the server is out (see -outage-kind)")
	flag.StringVar(&c.outageKind, "outage-kind", "503", "how the server is out: 503 (the store answers 503), reset (the store resets every connection: nginx answers 502) or down (nginx stopped: connections refused)")
	flag.StringVar(&c.label, "label", "", "a name printed at the start of the line")
	flag.DurationVar(&c.limit, "limit", 5*time.Minute, "kill the feeder after this long")
	flag.Uint64Var(&c.seed, "seed", 1, "the seed of the store's faults")
	flag.Parse()
	if c.outageKind != "503" && c.outageKind != "reset" && c.outageKind != "down" {
		fmt.Fprintf(os.Stderr, "arena: -outage-kind %q: want 503, reset or down\n", c.outageKind)
		os.Exit(2)
	}
	if flag.NArg() == 0 || c.docs < 1 || c.rate < 1 || c.burst < 0 || c.fault < 0 || c.reset < 0 || c.fault+c.reset > 1 {
		fmt.Fprintln(os.Stderr, "usage: arena [-docs N] [-rate R] [-burst B] [-fault F] [-reset F] [-outage AT+DUR] [-label L] -- FEEDER ARGS…")
		os.Exit(2)
	}
	line, err := run(c, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "arena:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// run sets up the store and nginx, runs the feeder and returns the line.
func run(c config, feeder []string) (string, error) {
	at, dur, err := parseOutage(c.outage)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "arena")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	docs := filepath.Join(dir, "docs.jsonl")
	if err := writeDocs(docs, c.docs); err != nil {
		return "", err
	}
	st := newStore(c.fault, c.reset, c.seed)
	var started atomic.Int64 // when the feeder started, as UnixNano; set before it does
	if c.outageKind != "down" {
		st.outage, st.outageReset = window(&started, at, dur), c.outageKind == "reset"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: st, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	ng, err := startNginx(dir, c.rate, c.burst, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		return "", err
	}
	defer ng.stop()

	url := "http://" + ng.addr()
	expand := func(s string) string {
		return strings.NewReplacer("$ARENA_URL", url, "${ARENA_URL}", url, "$ARENA_DOCS", docs, "${ARENA_DOCS}", docs).Replace(s)
	}
	args := make([]string, len(feeder))
	for i, a := range feeder {
		args[i] = expand(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "ARENA_URL="+url, "ARENA_DOCS="+docs)
	cmd.Stdout, cmd.Stderr = nil, nil
	if os.Getenv("ARENA_SHOW") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	start := time.Now()
	started.Store(start.UnixNano())
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(c.limit, func() { _ = cmd.Process.Kill() })
	downDone := make(chan error, 1)
	if c.outageKind == "down" && dur > 0 {
		go func() { downDone <- takeDown(ng, at, dur) }()
	} else {
		downDone <- nil
	}
	werr := cmd.Wait()
	timer.Stop()
	if err := <-downDone; err != nil {
		return "", err
	}
	elapsed := time.Since(start)
	exit := 0
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		exit = ee.ExitCode()
	case werr != nil:
		return "", werr
	}
	var cpu time.Duration
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// nginx writes its log as requests end: stop it first.
	ng.stop()
	statuses, err := ng.statuses()
	if err != nil {
		return "", err
	}
	up := elapsed - max(0, min(elapsed, at+dur)-at) // the store's time up: an outage has no capacity
	return formatLine(c, exit, elapsed, up, cpu, st, statuses), nil
}

// formatLine is the arena's line.
func formatLine(c config, exit int, elapsed, up, cpu time.Duration, st *store, statuses map[int]int) string {
	stored, twice := st.counts()
	requests := 0
	codes := make([]int, 0, len(statuses))
	for code, n := range statuses {
		requests += n
		codes = append(codes, code)
	}
	sort.Ints(codes)
	var by []string
	for _, code := range codes {
		by = append(by, fmt.Sprintf("%d:%d", code, statuses[code]))
	}
	admitted := float64(c.rate)*up.Seconds() + float64(c.burst)
	wasted := 0.0
	if requests > 0 {
		wasted = 100 * float64(requests-stored) / float64(requests)
	}
	return fmt.Sprintf("%-22s exit=%d docs=%d acked=%d lost=%d dup=%d elapsed=%.2fs goodput=%.3f docs/s=%.0f requests=%d (%s) wasted=%.1f%% cpu=%.2fs cpu/kdoc=%.0fms",
		c.label, exit, c.docs, stored, c.docs-stored, twice, elapsed.Seconds(), min(float64(stored)/admitted, 1),
		float64(stored)/elapsed.Seconds(), requests, strings.Join(by, " "), wasted, cpu.Seconds(),
		float64(cpu.Milliseconds())/float64(c.docs)*1000)
}

// takeDown stops nginx at at after now, and starts it again dur later, so
// that connections are refused meanwhile.
func takeDown(ng *nginx, at, dur time.Duration) error {
	time.Sleep(at)
	ng.stop()
	time.Sleep(dur)
	return ng.start()
}

// parseOutage parses AT+DUR; "" is no outage.
func parseOutage(s string) (at, dur time.Duration, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, d, ok := strings.Cut(s, "+")
	if ok {
		if at, err = time.ParseDuration(a); err == nil {
			dur, err = time.ParseDuration(d)
		}
	}
	if !ok || err != nil || at < 0 || dur <= 0 {
		return 0, 0, fmt.Errorf("-outage %q: want AT+DUR, such as 3s+5s", s)
	}
	return at, dur, nil
}

// writeDocs writes n puts, one a line: id:music:music::I with fields
// naming I.
func writeDocs(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	for i := range n {
		b.WriteString(`{"put":"id:music:music::` + strconv.Itoa(i) + `","fields":{"n":` + strconv.Itoa(i) + `,"title":"Document ` + strconv.Itoa(i) + `"}}` + "\n")
		if b.Len() > 1<<20 {
			if _, err := f.WriteString(b.String()); err != nil {
				f.Close()
				return err
			}
			b.Reset()
		}
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
