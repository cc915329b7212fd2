// Command arena measures a feeder against a real rate limiter: it starts a
// loopback document store with a real nginx in front of it, writes a feed
// file of Vespa puts, runs the feeder command given after --, and prints
// one line from the store's and nginx's own counts. It is this project's
// instrument for the figures in its docs; it needs nginx (apt-get install
// nginx-light).
//
//	go run ./cmd/arena -rate 500 -docs 3000 -- retries feed -url '$ARENA_URL' '$ARENA_DOCS'
//
// The server: nginx admits -rate requests a second after a burst of -burst
// and answers 429 beyond (-h2: it speaks HTTP/2 without TLS, by prior
// knowledge). The store answers 503 to a share -fault of what nginx admits
// and resets the connection of a share -reset (nginx reports that as 502).
// With -inflight K it serves K requests at a time, -service D each (a
// capacity of K/D a second): with -queue Q up to Q more wait for a slot
// before it answers 429 (latency grows with load, as a Vespa content
// cluster's does), with none request K+1 gets a 429 at once (a hard wall).
// -outage AT+DUR takes the server away for DUR from AT after the feeder
// starts, as -outage-kind says: the store answers 503 to everything (503),
// resets every connection (reset), or nginx is stopped and started again
// (down). -phases AT:F,… sets the capacity to F times the nominal from AT on
// (nginx's rate, or the store's service time divided by F). -feeders N runs
// N copies of the feeder at once, each with its own N-th of the documents.
//
// The feeder gets the endpoint in $ARENA_URL and its feed file in
// $ARENA_DOCS, in its environment and expanded in its arguments, with
// $ARENA_FEEDER (0 to N-1) and $ARENA_FEEDERS.
//
// The line: the feeder's exit status (the first that is not 0 of several);
// acked, lost and dup (documents the store stored, never stored, stored
// more than once); elapsed; goodput (documents stored over the capacity
// integrated over the run, burst included; an outage's time has none); the
// requests by status as nginx logged them; wasted (the share of requests
// that stored no document); the feeders' CPU time, per 1000 documents, and
// their largest peak memory. With -outage: outage-requests (those the store
// answered in the outage; nginx down counts none) and recovery (seconds from
// the outage's end until acknowledgements are back at 0.9 of capacity over
// half a second; -1 if never). With -feeders: each feeder's documents a
// second over its own run, and Jain's fairness index over them (1 is fair).
//
// With -visit the store holds the documents and serves document/v1 visits
// (see visit.go); with -copy it also takes puts, as the destination of a
// copy. Each then has its own line (see line.go).
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	outageOn     string
	label        string
	limit        time.Duration
	seed         uint64
	h2           bool
	inflight     int
	queue        int
	service      time.Duration
	phases       string
	feeders      int
	visit, copy  bool
	buckets      int
	bucketTime   time.Duration
	visitTimeout time.Duration
	queryMode    bool
	bulkMode     bool
	bulk         bulkConfig
	query        queryConfig
	controlMode  bool
	control      controlConfig
}

func main() {
	var c config
	flag.IntVar(&c.docs, "docs", 5000, "documents in the feed file")
	flag.IntVar(&c.rate, "rate", 500, "requests a second nginx admits; 429 beyond")
	flag.IntVar(&c.burst, "burst", 20, "nginx's burst (nodelay)")
	flag.Float64Var(&c.fault, "fault", 0.002, "share of admitted requests the store answers 503")
	flag.Float64Var(&c.reset, "reset", 0.0015, "share of admitted requests whose connection the store resets (with -visit: of the buckets streamed, cut in the middle)")
	flag.StringVar(&c.outage, "outage", "", "AT+DUR: from AT after the feeder starts, for DUR, the server is out (see -outage-kind)")
	flag.StringVar(&c.outageKind, "outage-kind", "503", "how the server is out: 503 (the store answers 503), reset (the store resets every connection: nginx answers 502) or down (nginx stopped: connections refused)")
	flag.StringVar(&c.outageOn, "outage-on", "all", "with -copy: the requests an outage of kind 503 or reset meets: all, get (visits) or put")
	flag.StringVar(&c.label, "label", "", "a name printed at the start of the line")
	flag.DurationVar(&c.limit, "limit", 5*time.Minute, "kill the feeder after this long")
	flag.Uint64Var(&c.seed, "seed", 1, "the seed of the store's faults")
	flag.BoolVar(&c.h2, "h2", false, "nginx speaks HTTP/2 without TLS (prior knowledge), as Vespa's feed client expects on http")
	flag.IntVar(&c.inflight, "inflight", 0, "if above 0, the store serves this many requests at once and answers 429 beyond (with -visit: visits)")
	flag.IntVar(&c.queue, "queue", 0, "with -inflight: this many more requests wait for a slot before the store answers 429")
	flag.DurationVar(&c.service, "service", 0, "the time the store takes per request")
	flag.StringVar(&c.phases, "phases", "", "AT:F,…: from AT after the feeder starts, the capacity is F times the nominal")
	flag.IntVar(&c.feeders, "feeders", 1, "run this many feeders at once, each with its own share of the documents")
	flag.BoolVar(&c.visit, "visit", false, "the store holds the documents and serves visits; each feeder writes what it read to $ARENA_OUT")
	flag.BoolVar(&c.copy, "copy", false, "the store serves visits and takes puts: a copier visits $ARENA_URL and feeds $ARENA_URL_TO ($ARENA_URL_H2 over HTTP/2)")
	flag.IntVar(&c.buckets, "buckets", 512, "with -visit or -copy: the buckets the documents are spread over")
	flag.DurationVar(&c.bucketTime, "bucket-time", 0, "with -visit or -copy: the time one bucket takes to visit")
	flag.DurationVar(&c.visitTimeout, "visit-timeout", 0, "with -visit or -copy: a visit request ends after this, with a continuation token (0: a stream runs to its slice's end)")
	flag.BoolVar(&show, "show", false, "the feeders write their output to stderr (without it, the end of a feeder's stderr is printed when it exits other than 0)")
	flag.BoolVar(&c.bulkMode, "bulk", false, "a store that deletes and updates by selection (see bulk.go): the feeder gets $ARENA_URL and $ARENA_SELECTION")
	flag.StringVar(&c.bulk.faults, "bulk-faults", "", "with -bulk: A,B,C: the shares of requests answered 500 after part of their chunk, 504 with nothing processed, and cut after part")
	flag.StringVar(&c.bulk.selection, "selection", "", `with -bulk: the selection of the run ("true" or "music.n % M == R"; default music.n % 2 == 0)`)
	flag.BoolVar(&c.queryMode, "query", false, "containers that answer Vespa queries (see query.go): the feeder gets $ARENA_URLS and $ARENA_QUERIES")
	flag.IntVar(&c.query.containers, "containers", 3, "with -query: the containers")
	flag.StringVar(&c.query.tail, "tail", "", "with -query: SHARE+EXTRA: that share of the queries of the first -tail-on containers is held EXTRA longer")
	flag.IntVar(&c.query.tailOn, "tail-on", 1, "with -query: how many containers have the -tail")
	flag.StringVar(&c.query.pause, "pause", "", "with -query: EVERY+DUR: every answer is held while a pause of DUR every EVERY is on")
	flag.IntVar(&c.query.broken, "broken", 0, "with -query: the last N containers answer 500 to every query")
	flag.Float64Var(&c.query.bad, "bad", 0, "with -query: the share of bad queries in the file (illegal, soft doomed, degraded in turn)")
	flag.BoolVar(&c.controlMode, "control", false, "a config server stand-in (package controltest): the feeder deploys $ARENA_APP to $ARENA_URL, -deploys times")
	flag.IntVar(&c.control.deploys, "deploys", 10, "with -control: the deploys, each to a new stand-in")
	lag := flag.String("lag", "0s:3s", "with -control: MIN:MAX, the range each service's lag to a new generation is drawn from")
	flag.StringVar(&c.control.fault, "control-fault", "none", "with -control: "+strings.Join(controlFaults, ", "))
	serve := flag.Bool("serve", false, "run no feeder: start the server, print its URLs and the feed file's path, and serve until SIGINT or SIGTERM, to try a command by hand")
	flag.Parse()
	lo, hi, ok := strings.Cut(*lag, ":")
	var err1, err2 error
	c.control.lagMin, err1 = time.ParseDuration(lo)
	c.control.lagMax, err2 = time.ParseDuration(hi)
	if !ok || err1 != nil || err2 != nil || c.control.lagMin < 0 || c.control.lagMax < c.control.lagMin {
		fmt.Fprintf(os.Stderr, "arena: -lag %q: want MIN:MAX, two durations, 0 ≤ MIN ≤ MAX\n", *lag)
		os.Exit(2)
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "arena:", err)
		os.Exit(2)
	}
	if flag.NArg() == 0 && !*serve || flag.NArg() > 0 && *serve {
		fmt.Fprintln(os.Stderr, "usage: arena [flags] -- FEEDER ARGS… ($ARENA_URL and $ARENA_DOCS are expanded), or arena -serve [flags]")
		os.Exit(2)
	}
	line, exit, err := run(c, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "arena:", err)
		os.Exit(1)
	}
	fmt.Println(line)
	if exit != 0 {
		os.Exit(3) // a feeder did not exit 0: the line says with what
	}
}

// check reports a flag out of its range.
func (c config) check() error {
	switch {
	case c.outageKind != "503" && c.outageKind != "reset" && c.outageKind != "down":
		return fmt.Errorf("-outage-kind %q: want 503, reset or down", c.outageKind)
	case c.outageOn != "all" && c.outageOn != "get" && c.outageOn != "put":
		return fmt.Errorf("-outage-on %q: want all, get or put", c.outageOn)
	case c.docs < 1, c.rate < 1, c.burst < 0, c.fault < 0, c.reset < 0, c.fault+c.reset > 1:
		return errors.New("want -docs and -rate above 0, -burst, -fault and -reset not negative, -fault + -reset at most 1")
	case c.inflight < 0, c.queue < 0, c.queue > 0 && c.inflight == 0, c.feeders < 1, c.buckets < 1:
		return errors.New("want -inflight, -queue not negative (-queue with -inflight), -feeders and -buckets above 0")
	case c.visit && c.copy:
		return errors.New("-visit or -copy, not both")
	case c.query.broken < 0, c.query.broken > c.query.containers:
		return fmt.Errorf("-broken %d: want from 0 to -containers (%d)", c.query.broken, c.query.containers)
	}
	_, _, err := parseOutage(c.outage)
	if err == nil {
		_, err = parsePhases(c.phases)
	}
	return err
}

// feederRun is what one feeder came to.
type feederRun struct {
	exit    int
	elapsed time.Duration
	cpu     time.Duration
	rssKB   int64
	docs    int // its share of the documents
}

// withDefaults fills in what a config built in code may leave out.
func (c config) withDefaults() config {
	c.outageKind = cmp.Or(c.outageKind, "503")
	c.outageOn = cmp.Or(c.outageOn, "all")
	c.feeders = cmp.Or(c.feeders, 1)
	c.buckets = cmp.Or(c.buckets, 512)
	c.limit = cmp.Or(c.limit, 5*time.Minute)
	return c
}

// run sets up the store and nginx, runs the feeders and returns the line.
func run(c config, feeder []string) (line string, exit int, err error) {
	switch {
	case c.queryMode:
		c.limit = cmp.Or(c.limit, 5*time.Minute)
		return runQuery(c, feeder)
	case c.controlMode:
		c.limit = cmp.Or(c.limit, 5*time.Minute)
		return runControl(c, feeder)
	case c.bulkMode:
		return runBulk(c.withDefaults(), feeder)
	}
	c = c.withDefaults()
	if err := c.check(); err != nil {
		return "", 0, err
	}
	at, dur, _ := parseOutage(c.outage)
	phases, _ := parsePhases(c.phases)
	dir, err := os.MkdirTemp("", "arena")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)

	var started atomic.Int64 // when the feeders started, as UnixNano; set before they do
	clock := &runClock{started: &started, phases: phases}
	st, vs, h := newStores(c, clock, at, dur)
	store, stop, err := serveLoopback(h)
	if err != nil {
		return "", 0, err
	}
	defer stop()
	listens := []listen{{h2: c.h2}}
	if c.copy {
		listens = append(listens, listen{}, listen{h2: true}) // ARENA_URL_TO, ARENA_URL_H2
	}
	ng, err := startNginx(dir, c.rate, c.burst, store.Port, listens)
	if err != nil {
		return "", 0, err
	}
	defer ng.stop()

	runs := make([]feederRun, c.feeders)
	cmds := make([]*exec.Cmd, c.feeders)
	outs := make([]string, c.feeders)
	for k := range c.feeders {
		docs := filepath.Join(dir, fmt.Sprintf("docs%d.jsonl", k))
		n, err := writeDocs(docs, c.docs, k, c.feeders)
		if err != nil {
			return "", 0, err
		}
		runs[k].docs = n
		outs[k] = filepath.Join(dir, fmt.Sprintf("out%d.jsonl", k))
		env := map[string]string{
			"ARENA_URL": ng.url(0), "ARENA_DOCS": docs, "ARENA_OUT": outs[k],
			"ARENA_FEEDER": strconv.Itoa(k), "ARENA_FEEDERS": strconv.Itoa(c.feeders),
		}
		if c.copy {
			env["ARENA_URL_TO"], env["ARENA_URL_H2"] = ng.url(1), ng.url(2)
		}
		if len(feeder) == 0 { // -serve
			return "", 0, serveUntilSignal(env, &started)
		}
		cmds[k] = feederCommand(feeder, env)
	}
	elapsed, err := runFeeders(c, cmds, runs, ng, phases, at, dur, &started)
	if err != nil {
		return "", 0, err
	}
	// nginx writes its log as requests end: stop it first.
	ng.stop()
	statuses, err := ng.statuses()
	if err != nil {
		return "", 0, err
	}
	m := measure{c: c, runs: runs, elapsed: elapsed, statuses: statuses, st: st, vs: vs, clock: clock, at: at, dur: dur}
	switch {
	case c.visit:
		line, err = m.visitLine(outs)
	case c.copy:
		line = m.copyLine()
	default:
		line = m.feedLine()
	}
	return line, m.exit(), err
}

// newStores returns the document store, the visit store of -visit and
// -copy (nil otherwise), both out from at for dur (an outage of the store,
// not -outage-kind down), and the handler that serves them.
func newStores(c config, clock *runClock, at, dur time.Duration) (*store, *visitStore, http.Handler) {
	st := newStore(c, clock)
	var vs *visitStore
	if c.visit || c.copy {
		vs = newVisitStore(c, clock)
	}
	if c.outageKind != "down" && dur > 0 {
		out := clock.within(at, dur)
		if c.outageOn != "get" || !c.copy {
			st.outage = out
		}
		if vs != nil && (c.outageOn != "put" || !c.copy) {
			vs.outage = out
		}
		st.outageReset = c.outageKind == "reset"
		if vs != nil {
			vs.outageReset = st.outageReset
		}
	}
	if vs == nil {
		return st, nil, st
	}
	return st, vs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			vs.ServeHTTP(w, r)
			return
		}
		if !c.copy {
			writeJSON(w, http.StatusMethodNotAllowed, `{"message":"this store only serves visits"}`)
			return
		}
		st.ServeHTTP(w, r)
	})
}

// runFeeders starts the feeders' commands at once, with the phases and an
// outage of kind down, and waits for them all: how long they took.
func runFeeders(c config, cmds []*exec.Cmd, runs []feederRun, ng *nginx, phases []phase, at, dur time.Duration, started *atomic.Int64) (time.Duration, error) {
	start := time.Now()
	started.Store(start.UnixNano())
	for k, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, p := range cmds[:k] {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
			return 0, err
		}
	}
	stopPhases := ng.follow(phases, c.rate)
	downDone := make(chan error, 1)
	if c.outageKind == "down" && dur > 0 {
		go func() { downDone <- takeDown(ng, at, dur) }()
	} else {
		downDone <- nil
	}
	var wg sync.WaitGroup
	var waitErr error
	var mu sync.Mutex
	for k, cmd := range cmds {
		wg.Go(func() {
			if err := waitFeeder(k, cmd, c.limit, start, &runs[k]); err != nil {
				mu.Lock()
				waitErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopPhases()
	if err := <-downDone; err != nil {
		return 0, err
	}
	return elapsed, waitErr
}

// waitFeeder waits for feeder k, started at start, killing it with its
// children at limit, and records in r its exit status, time, CPU and
// memory; the end of its stderr is printed when it exits other than 0.
func waitFeeder(k int, cmd *exec.Cmd, limit time.Duration, start time.Time, r *feederRun) error {
	timer := time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "arena: feeder %d still running after -limit %v: killed with its children\n", k, limit)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	werr := cmd.Wait()
	timer.Stop()
	r.elapsed = time.Since(start)
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		r.exit = ee.ExitCode()
	case werr != nil:
		return werr
	}
	if tl, ok := cmd.Stderr.(*tail); ok && r.exit != 0 {
		fmt.Fprintf(os.Stderr, "arena: feeder %d exited %d; the end of its stderr:\n%s\n", k, r.exit, tl)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.rssKB = ru.Maxrss
	}
	return nil
}

// serveUntilSignal prints the ARENA_ variables of env, which a command
// typed by hand uses, and waits for SIGINT or SIGTERM. The run's clock
// starts now, for -outage and -phases.
// shellQuote returns s as a shell word: as it is when it holds only safe
// characters, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@=,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func serveUntilSignal(env map[string]string, started *atomic.Int64) error {
	started.Store(time.Now().UnixNano())
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !strings.HasPrefix(k, "ARENA_FEEDER") {
			fmt.Printf("export %s=%s\n", k, shellQuote(env[k]))
		}
	}
	fmt.Println("# serving until interrupted")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	return nil
}

// runFeeder runs the one feeder of the query and bulk modes with env,
// started at start, to its end or limit.
func runFeeder(feeder []string, env map[string]string, limit time.Duration, start time.Time) (feederRun, error) {
	var r feederRun
	cmd := feederCommand(feeder, env)
	if err := cmd.Start(); err != nil {
		return r, err
	}
	err := waitFeeder(0, cmd, limit, start, &r)
	return r, err
}

// feederCommand is the feeder's command, its arguments expanded with env,
// which it also gets in its environment.
func feederCommand(feeder []string, env map[string]string) *exec.Cmd {
	// The longer names first, so that $ARENA_URL_TO is not read as
	// $ARENA_URL followed by _TO.
	keys := slices.SortedFunc(maps.Keys(env), func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, "${"+k+"}", env[k], "$"+k, env[k])
	}
	expand := strings.NewReplacer(pairs...)
	args := make([]string, len(feeder))
	for i, a := range feeder {
		args[i] = expand.Replace(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if show {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	} else {
		cmd.Stderr = &tail{max: 40}
	}
	// Its own process group, so that the limit kills what it started too
	// (go run's binary, a shell's children).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// show makes the feeders write their output to the arena's stderr
// (-show); otherwise the last lines of a feeder's stderr are printed when
// it exits with a status other than 0.
var show bool

// tail keeps the last max lines written to it.
type tail struct {
	max   int
	mu    sync.Mutex
	lines []string
	part  string
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.part + string(p)
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok {
			break
		}
		t.lines = append(t.lines, line)
		if len(t.lines) > t.max {
			t.lines = t.lines[1:]
		}
		s = rest
	}
	t.part = s
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(append(t.lines, t.part), "\n")
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

// writeDocs writes the puts of the documents i < n with i mod of == k, one
// a line: id:music:music::I with fields naming I; it returns how many.
func writeDocs(path string, n, k, of int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	count := 0
	for i := k; i < n; i += of {
		count++
		b.WriteString(`{"put":"` + docIDOf(i) + `","fields":` + fieldsOf(i) + "}\n")
		if b.Len() > 1<<20 {
			if _, err := f.WriteString(b.String()); err != nil {
				f.Close()
				return 0, err
			}
			b.Reset()
		}
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return 0, err
	}
	return count, f.Close()
}

// docIDOf is the id of document i.
func docIDOf(i int) string { return "id:music:music::" + strconv.Itoa(i) }

// fieldsOf is the fields of document i, as JSON.
func fieldsOf(i int) string {
	return `{"n":` + strconv.Itoa(i) + `,"title":"Document ` + strconv.Itoa(i) + `"}`
}

// serveLoopback serves h on a port of 127.0.0.1 until stop is called.
func serveLoopback(h http.Handler) (addr *net.TCPAddr, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().(*net.TCPAddr), func() { _ = hs.Close() }, nil
}
