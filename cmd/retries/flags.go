package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// command describes a subcommand for its -h help.
type command struct {
	synopsis string // the command line, after "retries "
	about    string // what it does, in lines of at most 72 characters
}

// commands are the subcommands that have flags or a help of their own.
var commands = map[string]command{
	"policies": {
		synopsis: "policies",
		about: "A table of the seven policies: what they retry, when they stop, how\n" +
			"long they wait, and what comes back when they give up. No flags.\n",
	},
	"schedule": {
		synopsis: "schedule POLICY|all [-attempts N] [-samples K] [-svg FILE]",
		about: "Min, p50, p95 and max of each wait over K sampled schedules, as a text\n" +
			"chart, and as an SVG chart with -svg. POLICY is one of query, docv1,\n" +
			"throttle, syncrequest, visit, controlplane, urlvalidation (any case),\n" +
			"or all.\n",
	},
	"feed": {
		synopsis: "feed -url URL [-concurrency N] [-connections N] [-http2] [-timeout D] [-header 'Name: value'] [-q] FILE|-",
		about: "Feeds Vespa documents (JSON lines or one JSON array of put, update and\n" +
			"remove operations) from FILE, or stdin for -, to a document/v1\n" +
			"endpoint through DocV1 around Throttle, with an adaptive limiter and a\n" +
			"retry budget. Reports each failed operation on stderr and a JSON\n" +
			"summary on stdout; exits 1 if any operation failed.\n",
	},
	"demo": {
		synopsis: "demo [-docs N] [-rate R] [-concurrency C] [-fault-rate F] [-reset-rate F]",
		about: "Feeds N JSON documents through DocV1 around Throttle into a loopback\n" +
			"server that admits R requests/s, answers 503 to a fraction of the\n" +
			"admitted requests and resets the connection of another fraction.\n" +
			"Exits 1 if a document is lost. N/R, the shortest time the feed can\n" +
			"take, must be at most " + strconv.Itoa(maxDemoSeconds) + " s.\n",
	},
}

func newFlagSet(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ContinueOnError)
}

// helpRequest is the answer to -h: the command's help, for stdout.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

// Unwrap makes a helpRequest match flag.ErrHelp.
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// help returns the help of the command that fs parses: its synopsis, what
// it does, and each flag with its bounds and default.
func help(fs *flag.FlagSet) string {
	var b strings.Builder
	c := commands[fs.Name()]
	fmt.Fprintf(&b, "usage: retries %s\n\n%s", c.synopsis, c.about)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		b.WriteString("\nflags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return b.String()
}

// parseFlags parses args with fs, allowing positional arguments before,
// between and after the flags, and returns the positional ones. Flag errors
// become usage errors; -h returns a *helpRequest with the command's help.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{text: help(fs)}
			}
			return nil, usageErrorf("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// intVar defines an int flag like fs.IntVar that accepts only lo to hi,
// and adds the bounds to its usage.
func intVar(fs *flag.FlagSet, p *int, name string, value, lo, hi int, usage string) {
	*p = value
	fs.Var(&boundedInt{p: p, lo: lo, hi: hi}, name, fmt.Sprintf("%s (%d to %d)", usage, lo, hi))
}

// floatVar defines a float64 flag like fs.Float64Var that accepts only lo
// to hi, and adds the bounds to its usage. NaN and infinities are refused,
// and -0 becomes 0.
func floatVar(fs *flag.FlagSet, p *float64, name string, value, lo, hi float64, usage string) {
	*p = value
	fs.Var(&boundedFloat{p: p, lo: lo, hi: hi}, name, fmt.Sprintf("%s (%s to %s)", usage, fmtFloat(lo), fmtFloat(hi)))
}

// boundedInt is the flag.Value of intVar.
type boundedInt struct {
	p      *int
	lo, hi int
}

func (b *boundedInt) String() string {
	if b == nil || b.p == nil {
		return "0"
	}
	return strconv.Itoa(*b.p)
}

func (b *boundedInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil || v < int64(b.lo) || v > int64(b.hi) {
		prefix := ""
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			prefix = "not a whole number: "
		}
		return fmt.Errorf("%smust be between %d and %d", prefix, b.lo, b.hi)
	}
	*b.p = int(v)
	return nil
}

// boundedFloat is the flag.Value of floatVar.
type boundedFloat struct {
	p      *float64
	lo, hi float64
}

func (b *boundedFloat) String() string {
	if b == nil || b.p == nil {
		return "0"
	}
	return fmtFloat(*b.p)
}

func (b *boundedFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	// ParseFloat accepts "NaN" and "Inf"; !(lo <= v <= hi) refuses both.
	if err != nil || !(v >= b.lo && v <= b.hi) {
		prefix := ""
		if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(v) {
			prefix = "not a number: "
		}
		return fmt.Errorf("%smust be between %s and %s", prefix, fmtFloat(b.lo), fmtFloat(b.hi))
	}
	if v == 0 {
		v = 0 // -0 would print as "-0"
	}
	*b.p = v
	return nil
}

// fmtFloat formats v as briefly as it reads back, without an exponent for
// the flags' bounds and defaults: 1000000, 0.002.
func fmtFloat(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
