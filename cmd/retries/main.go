// Retries shows what the retry policies of package retries do, and feeds
// Vespa documents with them: a table of the seven policies, sampled wait
// schedules as text or SVG charts, a live demo that feeds documents through
// DocV1 around Throttle into a loopback server that throttles, fails and
// resets connections, and feed, which sends a file of Vespa operations to a
// document/v1 endpoint and reports every operation that did not make it;
// visit, copy, delete, update and bench beside it, and deploy and wait,
// which deploy an application package to a config server and wait until it
// serves.
//
// "retries -h" lists the commands; "retries COMMAND -h" prints a command's
// flags, each numeric one with its bounds: a value outside them, NaN or an
// infinity is refused with exit status 2.
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

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed (a lost document, an unwritable file)
	exitUsage = 2 // bad input, or a setup that every request would meet (a refused certificate or token, a wrong -url)
	// The feed command's own: it ended before its input did.
	exitInterrupted = 3 // by a signal
	exitOutage      = 4 // by an outage longer than -max-outage
)

func main() {
	tuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// The first interrupt ends the feed gracefully; a second one, while it
	// waits for requests in flight or writes the -failed file, ends the
	// process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
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
	case "visit":
		err = runVisit(ctx, rest, stdout, stderr)
	case "copy":
		err = runCopy(ctx, rest, stdout, stderr)
	case "bench":
		err = runBench(ctx, rest, os.Stdin, stdout, stderr)
	case "deploy":
		err = runDeploy(ctx, rest, stdout, stderr)
	case "wait":
		err = runWait(ctx, rest, stdout, stderr)
	case "delete":
		err = runBulk(ctx, rest, false, stdout, stderr)
	case "update":
		err = runBulk(ctx, rest, true, stdout, stderr)
	case "version":
		err = runVersion(rest, stdout)
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		if _, ok := lookupCommand(rest[0]); !ok || len(rest) > 1 {
			err = usageErrorf("help: want one of policies, schedule, demo, feed, visit, copy, delete, update, bench, deploy, wait or version, got %q", rest)
			break
		}
		return runContext(ctx, []string{rest[0], "-h"}, stdout, stderr)
	default:
		err = usageErrorf("unknown command %q", cmd)
	}
	var (
		ue *usageError
		se *setupError
		hr *helpRequest
		sx silentExit
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errSilent): // reported already
		return exitFail
	case errors.As(err, &sx):
		return int(sx)
	case errors.As(err, &hr):
		fmt.Fprint(stdout, hr.text)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "retries: %v\n%s", err, shortUsage(cmd))
		return exitUsage
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "retries: %v\n", err)
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

// setupError is a setup that the command found wrong only when it ran,
// such as a file it cannot open or a certificate the server refused:
// exit 2, without the usage, which would bury the cause.
type setupError struct{ msg string }

func (e *setupError) Error() string { return e.msg }

func setupErrorf(format string, args ...any) error {
	return &setupError{msg: fmt.Sprintf(format, args...)}
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
