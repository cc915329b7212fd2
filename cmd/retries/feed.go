package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/resume"
)

// The feed command's bounds; its defaults are package feed's.
const (
	// maxFeedConcurrency bounds -concurrency, maxFeedConnections
	// -connections.
	maxFeedConcurrency = 4096
	maxFeedConnections = 4096
	// maxFeedTrace bounds -trace: Vespa's trace levels go up to 9.
	maxFeedTrace = 9
)

// readHeaderFile adds the headers of the file at path to h: one
// 'Name: value' a line; blank lines and lines starting with # are skipped.
// Its errors name the line, never its content, which may be a secret.
func readHeaderFile(path string, h *headerFlag) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := h.add(line); err != nil {
			return fmt.Errorf("%s:%d: want 'Name: value'", path, i+1)
		}
	}
	return nil
}

// urlsFlag collects -url flags.
type urlsFlag []string

func (f *urlsFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ", ")
}

func (f *urlsFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// headerFlag collects -header 'Name: value' flags. Neither its String nor
// its errors hold a value, which may be a secret: Set keeps the first
// error, without the flag's text, for check to return once the flags are
// parsed (the flag package would quote the text in its own message).
type headerFlag struct {
	h   http.Header
	n   int   // -header flags seen
	err error // the first bad one's
}

func (f *headerFlag) String() string {
	if f == nil || len(f.h) == 0 {
		return ""
	}
	names := make([]string, 0, len(f.h))
	for n := range f.h {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

func (f *headerFlag) Set(s string) error {
	f.n++
	if err := f.add(s); err != nil && f.err == nil {
		f.err = fmt.Errorf("-header (the %s): %v", ordinal(f.n), err)
	}
	return nil
}

// check returns the first -header flag's error, or nil.
func (f *headerFlag) check() error { return f.err }

// add adds the header s, 'Name: value'. Its errors name the header at
// most, never the value.
func (f *headerFlag) add(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return errors.New("want 'Name: value'")
	}
	if strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("header %s: the value holds a line break", name)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, value)
	return nil
}

// ordinal returns "1st", "2nd", "3rd", "4th" and so on.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// feedFlags are the flags of the feed command.
type feedFlags struct {
	urls                     urlsFlag
	concurrency, connections int
	http2, quiet             bool
	progress                 time.Duration
	progressJSON             bool
	progressFile             string
	timeout, maxOutage       time.Duration
	grace                    time.Duration
	failed, headerFile       string
	checkpoint               string
	compression              string
	cert, key, ca            string
	route                    string
	trace                    int
	serverTimeout            time.Duration
	dryRun                   bool
	header                   headerFlag
	breaker                  struct{ window, failures, streak int }
}

// addFeedFlags defines the feed command's flags on fs.
func addFeedFlags(fs *flag.FlagSet, f *feedFlags) {
	fs.Var(&f.urls, "url", "the document/v1 `URL`, such as http://localhost:8080 (required); repeat it for several endpoints, each operation going to the least loaded")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "keep `FILE` up to date with how far the input is fed, and resume from it when it exists (a named input only, not stdin)")
	addSendFlags(fs, f)
}

// addSendFlags defines the flags of how the feed sends, which the copy
// command has too, on fs.
func addSendFlags(fs *flag.FlagSet, f *feedFlags) {
	intVar(fs, &f.concurrency, "concurrency", 0, 0, maxFeedConcurrency, "`N` requests in flight, fixed; 0: the adaptive limiter decides")
	intVar(fs, &f.connections, "connections", 0, 0, maxFeedConnections, "`N` connections per endpoint: N over HTTP/2, at most N over HTTP/1.1; 0: 8 over HTTP/2 (as vespa feed), as many as needed over HTTP/1.1")
	fs.BoolVar(&f.http2, "http2", false, "HTTP/2 without TLS on http URLs (prior knowledge)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "time limit of each operation, its retries included, not counting the time paused by an outage; 0: none")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "after an interrupt, how long to wait for the requests in flight before canceling them; 0: cancel at once")
	fs.DurationVar(&f.maxOutage, "max-outage", 5*time.Minute, "end the feed when the server has been out for this long; 0: wait for ever")
	fs.StringVar(&f.failed, "failed", "", "write every operation not acknowledged to `FILE`, in feed format: the failed, the unsent and the unread rest")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines (as -progress 0)")
	fs.DurationVar(&f.progress, "progress", time.Second, "time between progress reports on stderr; 0: none")
	fs.BoolVar(&f.progressJSON, "progress-json", false, "write each progress report as one JSON line with the summary's keys so far")
	fs.StringVar(&f.progressFile, "progress-file", "", "write the progress reports to `FILE` instead of stderr (with -progress-json, a file of JSON lines only)")
	fs.Var(&f.header, "header", "send the header `'Name: value'` with every request (repeatable); never printed")
	fs.StringVar(&f.headerFile, "header-file", "", "read headers from `FILE`, one 'Name: value' a line, so that tokens stay out of the process list; never printed")
	fs.StringVar(&f.route, "route", "", "the document/v1 route `R` of every operation; empty: the server's default")
	intVar(fs, &f.trace, "trace", 0, 0, maxFeedTrace, "the document/v1 tracelevel `N`; a failed operation's report quotes the trace; 0: none")
	fs.DurationVar(&f.serverTimeout, "server-timeout", 0, "the document/v1 timeout of each request, at least 1ms; 0: the server's default")
	fs.StringVar(&f.compression, "compression", "auto", "gzip request bodies: `auto` (those over 512 bytes, as Vespa's clients do), gzip (all) or none")
	fs.StringVar(&f.cert, "cert", "", "the client certificate, a PEM `FILE`, for mutual TLS on https URLs; read again when it changes")
	fs.StringVar(&f.key, "key", "", "the client certificate's private key, a PEM `FILE`")
	fs.StringVar(&f.ca, "ca", "", "trust the CA certificates of this PEM `FILE` instead of the system's")
	fs.IntVar(&f.breaker.window, "breaker-window", 20, "the breaker opens when -breaker-failures of the last `N` requests failed")
	fs.IntVar(&f.breaker.failures, "breaker-failures", 15, "the failures among the last -breaker-window requests that open the breaker (`N`)")
	fs.IntVar(&f.breaker.streak, "breaker-streak", 5, "the breaker also opens on `N` failures in a row over at least a second; 0: never")
	fs.BoolVar(&f.dryRun, "dry-run", false, "send dryRun=true: the server parses each operation and writes nothing (a speed test of the client and network)")
}

// runFeed is the feed command: its flags checked, the feed opened (the
// input, the checkpoint, the failed files, the client), run, and its end
// said.
func runFeed(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("feed")
	var f feedFlags
	addFeedFlags(fs, &f)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := f.check(pos); err != nil {
		return err
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	job, err := openFeed(&f, cfg, pos[0], stdin, stderr)
	if err != nil {
		return err
	}
	defer job.close()
	stopProfile, err := startCPUProfile(os.Getenv("RETRIES_CPUPROFILE"))
	if err != nil {
		return setupErrorf("feed: RETRIES_CPUPROFILE: %v", err)
	}
	r, err := job.ff.Run(ctx, job.client)
	stopProfile()
	if err != nil {
		return setupErrorf("feed: -checkpoint: %v", err)
	}
	return feedEnd(ctx, &f, r, job.begun, stdout, stderr)
}

// feedJob is an opened feed: its input, its resumable engine and client,
// and what to close after it.
type feedJob struct {
	ff      *resume.FileFeed
	client  *feed.Client
	begun   resume.Start
	closers []io.Closer
}

func (j *feedJob) close() {
	for _, c := range slices.Backward(j.closers) {
		c.Close()
	}
}

// openFeed opens the feed of input (a path, or - for stdin) with the
// config of f: exit 2 for what the flags cannot make (a checkpoint of
// stdin, of the failed files or of another input; failed files that are
// the input; a bad -url), before anything is written.
func openFeed(f *feedFlags, cfg feed.Config, input string, stdin io.Reader, stderr io.Writer) (_ *feedJob, err error) {
	job := &feedJob{}
	defer func() {
		if err != nil {
			job.close()
		}
	}()
	in := stdin
	if input != "-" {
		file, err := os.Open(input)
		if err != nil {
			return nil, setupErrorf("feed: %v", err)
		}
		job.closers = append(job.closers, file)
		in = file
	}
	if f.checkpoint != "" {
		if input == "-" {
			return nil, usageErrorf("feed: -checkpoint needs a named input FILE: stdin cannot be resumed")
		}
		if f.failed != "" && sameFile(f.checkpoint, f.failed, ".unknown", ".unread", ".partial", ".unknown.partial", ".unread.partial") {
			return nil, usageErrorf("feed: -checkpoint %s is one of the files of -failed %s: name another", f.checkpoint, f.failed)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, usageErrorf("feed: -url: %v", err)
	}
	ff, err := resume.OpenFileFeed(resume.FileFeedConfig{Input: in, Checkpoint: f.checkpoint, Failed: f.failed})
	switch {
	case errors.Is(err, resume.ErrFailedIsInput):
		return nil, usageErrorf("feed: -failed: %v", err)
	case err != nil:
		return nil, setupErrorf("feed: -checkpoint: %v", err)
	}
	job.ff, job.begun = ff, ff.Start()
	job.closers = append(job.closers, ff)
	var progress fileWriter // created once the flags are known to be good
	if f.progressFile != "" {
		cfg.ProgressOut = &progress
	}
	if cfg, err = ff.Configure(cfg); err != nil {
		return nil, setupErrorf("feed: -failed: %v", err)
	}
	if job.client, err = feed.New(cfg); err != nil {
		return nil, usageErrorf("feed: -url: %v", err)
	}
	switch line, offset := ff.Position(); {
	case job.begun.Complete:
		fmt.Fprintf(stderr, "retries feed: %s says every operation of the input was fed or reported: nothing to feed (remove it to feed the input again)\n", f.checkpoint)
	case job.begun.Resumed:
		fmt.Fprintf(stderr, "retries feed: resuming from %s: line %d (byte offset %d) on\n", f.checkpoint, line, offset)
	}
	if f.progressFile != "" {
		if progress.f, err = os.Create(f.progressFile); err != nil {
			return nil, setupErrorf("feed: -progress-file: %v", err)
		}
		job.closers = append(job.closers, progress.f)
	}
	return job, nil
}

// feedEnd says how the feed ended: what it skipped, the checkpoint's and
// the failed files' state, the summary on stdout, and the exit.
func feedEnd(ctx context.Context, f *feedFlags, r resume.FileFeedResult, begun resume.Start, stdout, stderr io.Writer) error {
	res := r.Report
	if r.Skipped > 0 {
		ops := "operations"
		if r.Skipped == 1 {
			ops = "operation"
		}
		fmt.Fprintf(stderr, "retries feed: skipped %d %s done before the resume\n", r.Skipped, ops)
	}
	if r.Checkpoint != nil {
		fmt.Fprintf(stderr, "retries feed: -checkpoint: %v; %s may be behind the feed\n", r.Checkpoint, f.checkpoint)
	}
	failed, unknown, unread := res.Files()
	for _, sf := range r.Files {
		switch {
		case sf.Err != nil:
			fmt.Fprintf(stderr, "retries feed: -failed: %v; %s.partial is incomplete\n", sf.Err, sf.Path)
		case sf.Kind == "failed" && failed > 0 && begun.Resumed:
			fmt.Fprintf(stderr, "retries feed: %s: %d more operations not acknowledged, after those of the feeds before the resume, to feed again\n", sf.Path, failed)
		case sf.Kind == "failed" && failed > 0:
			fmt.Fprintf(stderr, "retries feed: %s: %d operations not acknowledged, to feed again\n", sf.Path, failed)
		case sf.Kind == "unknown":
			fmt.Fprintf(stderr, "retries feed: %s: %d operations whose outcome is unknown: they may have been applied, and feeding them again may apply them twice\n", sf.Path, unknown)
		case sf.Kind == "unread":
			fmt.Fprintf(stderr, "retries feed: %s: the %d bytes of input from the broken JSON on, to fix and feed\n", sf.Path, unread)
		}
	}
	if _, err := stdout.Write(res.Summary()); err != nil {
		return err
	}
	return feedExit(ctx, res, r.Checkpoint == nil && filesWritten(r.Files))
}

// filesWritten reports whether every failed file was written whole.
func filesWritten(files []resume.SideFile) bool {
	for _, f := range files {
		if f.Err != nil {
			return false
		}
	}
	return true
}

// check returns a usage error for flags and arguments pos that cannot
// make a feed.
func (f *feedFlags) check(pos []string) error {
	if err := f.header.check(); err != nil {
		return usageErrorf("feed: %v", err)
	}
	switch {
	case len(f.urls) == 0:
		return usageErrorf("feed: -url is required")
	case len(pos) == 0:
		return usageErrorf("feed: name a FILE, or - for stdin")
	case len(pos) > 1:
		return usageErrorf("feed: unexpected argument %q", pos[1])
	case f.timeout < 0:
		return usageErrorf("feed: -timeout %v: must not be negative", f.timeout)
	case f.grace < 0:
		return usageErrorf("feed: -grace %v: must not be negative", f.grace)
	case f.maxOutage < 0:
		return usageErrorf("feed: -max-outage %v: must not be negative", f.maxOutage)
	case f.progress < 0:
		return usageErrorf("feed: -progress %v: must not be negative", f.progress)
	case f.breaker.window < 1 || f.breaker.failures < 1 || f.breaker.streak < 0:
		return usageErrorf("feed: -breaker-window and -breaker-failures must be at least 1, -breaker-streak at least 0")
	case f.serverTimeout != 0 && f.serverTimeout < time.Millisecond:
		return usageErrorf("feed: -server-timeout %v: want 0 or at least 1ms", f.serverTimeout)
	}
	return nil
}

// config returns the feed's configuration from the flags, reading the
// TLS and header files they name.
func (f *feedFlags) config(stderr io.Writer) (feed.Config, error) {
	compression, err := feed.ParseCompression(f.compression)
	if err != nil {
		return feed.Config{}, usageErrorf("feed: -compression %v", err)
	}
	tlsCfg, err := loadTLS(f.cert, f.key, f.ca)
	if err != nil {
		return feed.Config{}, setupErrorf("feed: %v", err)
	}
	for _, u := range f.urls {
		if tlsCfg != nil && !strings.HasPrefix(u, "https://") {
			return feed.Config{}, usageErrorf("feed: -cert, -key and -ca need https URLs")
		}
	}
	if f.headerFile != "" {
		if err := readHeaderFile(f.headerFile, &f.header); err != nil {
			return feed.Config{}, setupErrorf("feed: -header-file: %v", err)
		}
	}
	cfg := feed.Config{
		URL: f.urls[0], Header: f.header.h, TLS: tlsCfg, Concurrency: f.concurrency, Connections: f.connections, HTTP2: f.http2,
		Timeout: orNone(f.timeout), Grace: orNone(f.grace), MaxOutage: orNone(f.maxOutage),
		Route: f.route, TraceLevel: f.trace, ServerTimeout: f.serverTimeout, DryRun: f.dryRun, Compression: compression,
		Progress: f.progress, ProgressJSON: f.progressJSON, Log: stderr,
		BreakerWindow: f.breaker.window, BreakerFailures: f.breaker.failures, BreakerStreak: cmp.Or(f.breaker.streak, -1),
	}
	if f.quiet {
		cfg.Progress = 0
	}
	if len(f.urls) > 1 {
		cfg.URLs = f.urls
	}
	return cfg, nil
}

// feedExit returns the command's exit for a feed that ended with res;
// written says whether its files were written whole.
func feedExit(ctx context.Context, res feed.Report, written bool) error {
	if err := res.TLSError(); err != nil {
		return &setupError{msg: fmt.Sprintf("feed: TLS: %v", err)}
	}
	if err := res.SetupError(); err != nil {
		return &setupError{msg: fmt.Sprintf("feed: %v", err)}
	}
	switch {
	case res.Complete() && written:
		return nil
	case res.OutageExceeded():
		return silentExit(exitOutage)
	case ctx.Err() != nil:
		return silentExit(exitInterrupted)
	}
	return errSilent
}

// fileWriter writes to f, which is set once the file may be created.
type fileWriter struct{ f *os.File }

func (w *fileWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

// silentExit makes the command exit with its status without a message of
// its own: the feed has said why already.
type silentExit int

func (e silentExit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// startCPUProfile writes a CPU profile of the feed to the file named path
// (the RETRIES_CPUPROFILE environment variable), for go tool pprof, until
// stop is called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// orNone is a flag's duration for package feed, where 0 means the default
// and a negative duration none: the flag's 0 means none.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// errSilent makes the command exit 1 without a message of its own: the
// feed has reported each failure already.
var errSilent = errors.New("")

// sameFile reports whether path names base, or base with one of the
// suffixes, by its absolute path or, where both exist, as the same file.
func sameFile(path, base string, suffixes ...string) bool {
	p, err := filepath.Abs(path)
	if err != nil {
		p = path
	}
	pst, perr := os.Stat(path)
	for _, suf := range append([]string{""}, suffixes...) {
		b, err := filepath.Abs(base + suf)
		if err != nil {
			b = base + suf
		}
		if p == b {
			return true
		}
		if bst, err := os.Stat(base + suf); perr == nil && err == nil && os.SameFile(pst, bst) {
			return true
		}
	}
	return false
}
