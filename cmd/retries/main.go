// Retries shows what the retry policies of package retries do: a table of
// the seven policies and the waits they imply, sampled wait schedules as
// text or SVG charts, and a live demo that feeds documents through DocV1
// around Throttle into a loopback server that throttles, fails and resets
// connections.
//
// Usage:
//
//	retries [policies]
//	retries schedule POLICY|all [-attempts N] [-samples K] [-svg FILE]
//	retries demo [-docs N] [-rate R] [-concurrency C] [-fault-rate F] [-reset-rate F]
//	retries feed -url URL [-concurrency N] [-connections N] [-http2] [-timeout D] [-header 'Name: value'] [-q] FILE|-
//	retries COMMAND -h
//
// Feed sends Vespa documents (JSON lines or a JSON array of put, update and
// remove operations) to a document/v1 endpoint through DocV1 around
// Throttle, with an adaptive limiter and a retry budget; it reports every
// operation that failed and prints a summary with the keys of vespa feed.
//
// Every numeric flag has bounds, and a value outside them, NaN or an
// infinity is refused with exit status 2:
//
//	schedule -attempts N   0 to 200 (default 0: every wait the policy sleeps)
//	schedule -samples K    1 to 100000 (default 10000)
//	demo -docs N           1 to 1000000 (default 2000)
//	demo -rate R           1 to 1000000 requests/s (default 500)
//	demo -concurrency C    1 to 1024 (default 32)
//	demo -fault-rate F     0 to 1 (default 0.002)
//	demo -reset-rate F     0 to 1 (default 0.0015)
//	feed -concurrency N    0 to 4096 (default 0: the adaptive limiter)
//	feed -connections N    0 to 4096 (default 0: as many as needed)
//
// The demo also refuses a -fault-rate and -reset-rate that add up to more
// than 1, and a -docs N that takes more than an hour at -rate R (N/R over
// 3600 s). "retries COMMAND -h" prints the command's flags on stdout.
//
// It uses only the standard library and package retries.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/seed32e55400/retries"
)

const usage = `usage:
  retries [policies]
      a table of the seven policies: what they retry, when they stop,
      how long they wait, and what comes back when they give up
  retries schedule POLICY|all [-attempts N] [-samples K] [-svg FILE]
      min, p50, p95 and max of each wait over K sampled schedules, as a
      text chart, and as an SVG chart with -svg
        -attempts N     0 to 200, default 0: every wait the policy sleeps
        -samples K      1 to 100000, default 10000
  retries demo [-docs N] [-rate R] [-concurrency C] [-fault-rate F] [-reset-rate F]
      feed N JSON documents through DocV1 around Throttle into a loopback
      server that admits R requests/s, answers 503 to a fraction F and
      resets a fraction of connections; exits 1 if a document is lost
        -docs N         1 to 1000000, default 2000
        -rate R         1 to 1000000 requests/s, default 500
        -concurrency C  1 to 1024, default 32
        -fault-rate F   0 to 1, default 0.002
        -reset-rate F   0 to 1, default 0.0015
      the two rates add up to at most 1, and N/R is at most 3600 s
  retries feed -url URL [-concurrency N] [-connections N] [-http2]
               [-timeout D] [-header 'Name: value'] [-q] FILE|-
      feed Vespa documents (JSON lines or one JSON array of put, update
      and remove operations) to a document/v1 endpoint; reports each
      failed operation on stderr, a JSON summary on stdout; exits 1 if
      any operation failed
        -concurrency N  0 to 4096, default 0: the adaptive limiter
        -connections N  0 to 4096, default 0: as many as needed
  retries COMMAND -h, retries help COMMAND
      the command's flags

policies: query, docv1, throttle, syncrequest, visit, controlplane,
urlvalidation (any case), or all for schedule
`

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed (a lost document, an unwritable file)
	exitUsage = 2 // bad input
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns the
// exit status. It is main without the process: tests call it.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, rest := "policies", args
	if len(args) > 0 {
		cmd, rest = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "policies":
		err = runPolicies(rest, stdout)
	case "schedule":
		err = runSchedule(rest, stdout)
	case "demo":
		err = runDemo(ctx, rest, stdout)
	case "feed":
		err = runFeed(ctx, rest, os.Stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		if _, ok := commands[rest[0]]; !ok || len(rest) > 1 {
			err = usageErrorf("help: want one of policies, schedule, demo or feed, got %q", rest)
			break
		}
		return runContext(ctx, []string{rest[0], "-h"}, stdout, stderr)
	default:
		err = usageErrorf("unknown command %q", cmd)
	}
	var (
		ue *usageError
		hr *helpRequest
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errSilent): // reported already
		return exitFail
	case errors.As(err, &hr):
		fmt.Fprint(stdout, hr.text)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "retries: %v\n%s", err, usage)
		return exitUsage
	}
	fmt.Fprintf(stderr, "retries: %v\n", err)
	return exitFail
}

// usageError is bad input: it makes the command print the usage and exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// namedPolicy is one of the package's policies under its Go name.
type namedPolicy struct {
	name   string
	policy retries.Policy
}

// allPolicies returns the seven policies in the order of policies.go. It
// reads the package variables on each call.
func allPolicies() []namedPolicy {
	return []namedPolicy{
		{"Query", retries.Query},
		{"DocV1", retries.DocV1},
		{"Throttle", retries.Throttle},
		{"SyncRequest", retries.SyncRequest},
		{"Visit", retries.Visit},
		{"ControlPlane", retries.ControlPlane},
		{"URLValidation", retries.URLValidation},
	}
}

// lookupPolicies returns the policy called name, in any case, or all seven
// for "all" when allowAll is set.
func lookupPolicies(name string, allowAll bool) ([]namedPolicy, error) {
	if allowAll && strings.EqualFold(name, "all") {
		return allPolicies(), nil
	}
	for _, np := range allPolicies() {
		if strings.EqualFold(np.name, name) {
			return []namedPolicy{np}, nil
		}
	}
	return nil, usageErrorf("unknown policy %q", name)
}
