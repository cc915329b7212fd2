package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/feed"
)

// Demo defaults. With them a run takes about 5 s. Throttle absorbs every
// 429, so a document is lost only when each of DocV1's three attempts gets a
// 503 or a reset: with faults on a fraction f = 0.0035 of the admitted
// requests, f³ = 4.3e-8 per document, or about one run in 12000 for 2000
// documents. (A fault rate of 0.05 would lose a document in one run in five.)
const (
	defaultDocs        = 2000
	defaultRate        = 500
	defaultConcurrency = 32
	defaultFaultRate   = 0.002
	defaultResetRate   = 0.0015 // about 3 resets in a default run

	// Bounds on the flags, so that a typo cannot exhaust the machine or
	// start a feed that would run for days.
	maxDocs        = 1_000_000
	minRate        = 1
	maxRate        = 1_000_000
	maxConcurrency = 1024
	maxDemoSeconds = 3600 // the longest docs/rate, the shortest time a feed can take
)

// demoFlags are the demo command's flags.
type demoFlags struct {
	docs                 int
	rate                 float64
	concurrency          int
	faultRate, resetRate float64
	baseline             bool
}

// parseDemoFlags parses the demo command's flags, each within its bounds,
// and checks the bounds that span two flags.
func parseDemoFlags(args []string) (demoFlags, error) {
	fs := newFlagSet("demo")
	var f demoFlags
	addDemoFlags(fs, &f)
	pos, err := parseFlags(fs, args)
	switch {
	case err != nil:
		return f, err
	case len(pos) > 0:
		return f, usageErrorf("demo: unexpected argument %q", pos[0])
	case f.faultRate+f.resetRate > 1:
		return f, usageErrorf("demo: -fault-rate %v and -reset-rate %v: add up to more than 1", f.faultRate, f.resetRate)
	case float64(f.docs)/f.rate > maxDemoSeconds:
		return f, usageErrorf("demo: -docs %d at -rate %v: takes at least %.0f s, more than the %d s allowed; lower -docs or raise -rate",
			f.docs, f.rate, float64(f.docs)/f.rate, maxDemoSeconds)
	}
	return f, nil
}

// addDemoFlags defines the demo's flags on fs, each with its default and
// bounds, storing into f.
func addDemoFlags(fs *flag.FlagSet, f *demoFlags) {
	intVar(fs, &f.docs, "docs", defaultDocs, 1, maxDocs, "feed `N` documents")
	floatVar(fs, &f.rate, "rate", defaultRate, minRate, maxRate, "the server admits `R` requests per second")
	intVar(fs, &f.concurrency, "concurrency", defaultConcurrency, 1, maxConcurrency, "`C` requests in flight at most (the limiter's cap)")
	floatVar(fs, &f.faultRate, "fault-rate", defaultFaultRate, 0, 1, "the fraction `F` of admitted requests answered with 503")
	floatVar(fs, &f.resetRate, "reset-rate", defaultResetRate, 0, 1, "the fraction `F` of admitted requests whose connection is reset")
	fs.BoolVar(&f.baseline, "baseline", true, "then feed the same documents to a new server of the same kind without retries, and with pyvespa's layers without the limiter")
}

// demoConfig says what the demo does.
type demoConfig struct {
	docs        int
	rate        float64 // requests per second the server admits
	burst       float64 // the server's token bucket size; 0: rate/4, at least 1
	concurrency int
	fixed       bool      // concurrency is fixed, without the limiter (tests of the layers alone)
	faults      faultFunc // what the server does to admitted requests

	// outer and inner are the policies around each request: DocV1 and
	// Throttle in the command; tests pass copies without waits.
	outer, inner retries.Policy

	progress time.Duration // between progress reports; 0: none
	terminal bool          // rewrite one progress line instead of printing lines
}

// demoResult is what a demo run did, by the client's and the server's counts.
type demoResult struct {
	docs int

	// The server's counts.
	acked       int   // distinct documents acknowledged with a 200
	duplicates  int64 // 200 answers for a document already acknowledged
	serverReqs  int64
	throttled   int64 // 429 answers
	unavailable int64 // 503 answers
	resets      int64 // connections reset
	rejected    int64 // 400 answers: a body that was not the document

	// The client's counts.
	requests   int64 // requests sent
	got429     int64 // 429 responses received
	got503     int64 // 503 responses received
	connErrors int64 // requests that failed without a response
	retries    int64 // requests beyond the first of each document
	done       int64 // documents the client saw acknowledged
	givenUp    []string
	lastErr    error // the error of a document given up on, if any

	lost    []string // given up on, or never acknowledged by the server
	elapsed time.Duration
	burst   float64          // the server's token bucket size
	limiter *retries.Limiter // its final state
	budget  *retries.Budget
}

// runDemo is the demo command.
func runDemo(ctx context.Context, args []string, stdout io.Writer) error {
	f, err := parseDemoFlags(args)
	if err != nil {
		return err
	}
	cfg := demoConfig{
		docs:        f.docs,
		rate:        f.rate,
		concurrency: f.concurrency,
		faults:      randomFaults(f.faultRate, f.resetRate),
		outer:       feed.DefaultOuter,
		inner:       retries.Throttle,
		progress:    time.Second,
	}
	if isTerminal(stdout) {
		cfg.terminal, cfg.progress = true, 200*time.Millisecond
	}
	fmt.Fprintf(stdout, "Feeding %d documents through the engine of retries feed (DocV1 around Throttle,\nthe limiter at most %d in flight) into a loopback server that admits %s requests/s\n", cfg.docs, cfg.concurrency, trimFloat(cfg.rate))
	fmt.Fprintf(stdout, "(429 beyond), answers 503 to %s and resets the connection of %s of the admitted requests.\n", percent(f.faultRate), percent(f.resetRate))
	if n, ok := attemptsOf(cfg.outer.Stop()); ok {
		// Throttle absorbs every 429; a document is lost when each of the
		// outer attempts ends with a 503 or a reset.
		perDoc := math.Pow(f.faultRate+f.resetRate, float64(n))
		perRun := 1 - math.Pow(1-perDoc, float64(cfg.docs))
		fmt.Fprintf(stdout, "A document is lost only if all %d DocV1 attempts fail: chance %.2g per document,\n%.2g that this run loses any.\n", n, perDoc, perRun)
	}
	res, err := feedDemo(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	writeDemoSummary(stdout, cfg, res)
	if f.baseline {
		if err := writeBaselines(ctx, stdout, cfg); err != nil {
			return err
		}
	}
	if len(res.lost) > 0 {
		return fmt.Errorf("demo: %d of %d documents lost", len(res.lost), res.docs)
	}
	return nil
}

// writeBaselines feeds cfg's documents again, each time to a new server of
// the same kind, with cfg.concurrency requests in flight, fixed: by a
// plain net/http client that sends each document once, and through the
// feed with pyvespa's DocV1 around Throttle (their own waits) and no
// limiter. It prints one line each.
func writeBaselines(ctx context.Context, out io.Writer, cfg demoConfig) error {
	fmt.Fprintf(out, "\nThe same documents, each time to a new server of the same kind, %d requests in flight:\n", cfg.concurrency)
	line := func(name string, r demoResult) {
		fmt.Fprintf(out, "  %-34s %d of %d acknowledged, %d lost, %d requests (%d×429, %d×503), %.2f s\n",
			name, r.acked, r.docs, r.docs-r.acked, r.serverReqs, r.throttled, r.unavailable, r.elapsed.Seconds())
	}
	r, err := plainDemo(ctx, cfg)
	if err != nil {
		return err
	}
	line("net/http, each document sent once", r)
	bc := cfg
	bc.fixed, bc.outer, bc.inner, bc.progress = true, retries.DocV1, retries.Throttle, 0
	if r, err = feedDemo(ctx, bc, nil); err != nil {
		return err
	}
	line("DocV1 around Throttle, no limiter", r)
	return nil
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// docFields returns the JSON fields of document id; the demo server checks
// that the body it gets is exactly {"fields": docFields(id)}.
func docFields(id string) []byte {
	var d demoDoc
	d.Fields.ID = id
	d.Fields.Title = "Document " + id
	d.Fields.Text = "A document fed by the retries demo through DocV1 around Throttle."
	b, _ := json.Marshal(d.Fields)
	return b
}

// writeDemoSummary prints what the run did.
func writeDemoSummary(out io.Writer, cfg demoConfig, r demoResult) {
	fmt.Fprintln(out)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(out, "  %-20s %s\n", name, fmt.Sprintf(format, args...))
	}
	row("acknowledged", "%d of %d documents (the server's own count)", r.acked, r.docs)
	lost := fmt.Sprint(len(r.lost))
	if len(r.lost) > 0 {
		lost += fmt.Sprintf(" (%d given up by the client; first: %s)", len(r.givenUp), strings.Join(r.lost[:min(5, len(r.lost))], ", "))
		if r.lastErr != nil {
			lost += fmt.Sprintf("; last error: %v", r.lastErr)
		}
	}
	row("lost", "%s", lost)
	row("duplicates", "%d (documents the server acknowledged twice)", r.duplicates)
	row("requests sent", "%d for %d documents (%d retries)", r.requests, r.docs, r.retries)
	verb := "absorbed"
	if len(r.lost) > 0 {
		verb = "received"
	}
	row("429s "+verb, "%d", r.got429)
	row("503s "+verb, "%d", r.got503)
	row("connection resets", "%d (%d requests failed without a response)", r.resets, r.connErrors)
	row("elapsed", "%.2f s", r.elapsed.Seconds())
	row("goodput", "%.0f documents/s, %s", float64(r.acked)/r.elapsed.Seconds(), ofAdmitted(r.acked, r.elapsed, cfg.rate, r.burst))
	if r.limiter != nil {
		row("limiter", "%v", r.limiter)
	}
	if r.budget != nil {
		row("retry budget", "%v", r.budget)
		fmt.Fprintf(out, "  %-20s %s\n", "", "(DocV1's retries after a 503 or a reset, over the last 10 s; Throttle's retries of 429s are paced by the limiter and spend none)")
	}
	if r.rejected > 0 {
		row("rejected bodies", "%d (400: the body was not the document)", r.rejected)
	}
}

// ofAdmitted says what share n documents in elapsed are of the requests a
// server admits at rate a second after a burst: rate×elapsed + burst, so
// that the burst's credit never reads as more than 100 %.
func ofAdmitted(n int, elapsed time.Duration, rate, burst float64) string {
	admitted := rate*elapsed.Seconds() + burst
	return fmt.Sprintf("%.0f%% of the %.0f requests the server admits in that time (%s/s after a burst of %s)",
		100*float64(n)/admitted, admitted, trimFloat(rate), trimFloat(burst))
}

// percent formats a fraction as a percentage with at most three
// significant digits: 0.003 → "0.3%", 1/3 → "33.3%", 1e-9 → "1e-07%", and
// -0 → "0%".
func percent(f float64) string {
	if f == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*f, 'g', 3, 64) + "%"
}
