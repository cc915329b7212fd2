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

// command describes a subcommand: the one place its help is written. The
// usage (retries -h) and each command's help (retries COMMAND -h) are
// derived from it and from the flags that flags defines.
type command struct {
	name     string
	synopsis string              // the command line, after "retries "
	about    string              // what it does, in lines of at most 72 characters
	exits    string              // its exit statuses, one a line; "": 0 and 2 only
	flags    func(*flag.FlagSet) // defines the command's flags; nil: none
}

// The exit statuses of the commands that talk to Vespa.
const (
	exitsBad = "  2  bad flags or input, or a setup every request would meet (a refused\n" +
		"     certificate or token, a cluster the server does not have, a\n" +
		"     checkpoint of another run, or one another process holds)\n"
	exitsInterrupted = "  3  interrupted by SIGINT, SIGTERM or SIGHUP (a second one quits at once)\n"
	controlExits     = "  0  the generation serves: every service at it, every container up\n" +
		"  1  the deployment failed: the package was refused (400), the\n" +
		"     application is not there (404), or a service failed to apply the\n" +
		"     generation (named, with the config server's message)\n" +
		"  2  bad flags, a package that cannot be read or has no services.xml,\n" +
		"     refused credentials (401, 403), a -json FILE that cannot be written\n" +
		exitsInterrupted +
		"  4  -wait ran out first (what is behind is named)\n" +
		"  5  every service at the generation but those that apply it only when\n" +
		"     restarted (named): restart them\n"
)

// commands are the subcommands, in the order the usage lists them.
var commands = []command{
	{
		name:     "policies",
		synopsis: "[policies]",
		about: "A table of the seven policies: what they retry, when they stop, how\n" +
			"long they wait, and what comes back when they give up. No flags.\n",
	},
	{
		name:     "schedule",
		synopsis: "schedule POLICY|all [-attempts N] [-samples K] [-svg FILE]",
		about: "Min, p50, p95 and max of each wait over K sampled schedules, as a text\n" +
			"chart, and as an SVG chart with -svg. POLICY is one of query, docv1,\n" +
			"throttle, syncrequest, visit, controlplane, urlvalidation (any case),\n" +
			"or all.\n",
		flags: func(fs *flag.FlagSet) { addScheduleFlags(fs, &scheduleFlags{}) },
	},
	{
		name:     "demo",
		synopsis: "demo [-docs N] [-rate R] [-concurrency C] [-fault-rate F] [-reset-rate F] [-baseline=false]",
		about: "Feeds N JSON documents through DocV1 around Throttle into a loopback\n" +
			"server that admits R requests/s, answers 503 to a fraction of the\n" +
			"admitted requests and resets the connection of another fraction.\n" +
			"Exits 1 if a document is lost. The two fractions add up to at most 1,\n" +
			"and N/R, the shortest time the feed can take, must be at most " + strconv.Itoa(maxDemoSeconds) + " s.\n",
		flags: func(fs *flag.FlagSet) { addDemoFlags(fs, &demoFlags{}) },
	},
	{
		name:     "feed",
		synopsis: "feed -url URL [-url URL…] [-concurrency N] [-connections N] [-http2] [-timeout D] [-max-outage D] [-failed FILE] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE] [-compression auto|gzip|none] [-route R] [-trace N] [-server-timeout D] [-dry-run] [-breaker-window N] [-breaker-failures N] [-breaker-streak N] [-checkpoint FILE] [-progress D] [-progress-json] [-q] FILE|-",
		about: "Feeds Vespa documents (JSON lines or one JSON array of put, update and\n" +
			"remove operations) from FILE, or stdin for -, to a document/v1\n" +
			"endpoint through DocV1 around Throttle, with an adaptive limiter and a\n" +
			"retry budget. Reports each failed operation on stderr and a JSON\n" +
			"summary on stdout; exits 1 if any operation failed.\n",
		exits: "  0  every operation acknowledged\n  1  an operation failed, or a file could not be written\n" + exitsBad + exitsInterrupted +
			"  4  the server was out for longer than -max-outage\n",
		flags: func(fs *flag.FlagSet) { addFeedFlags(fs, &feedFlags{}) },
	},
	{
		name:     "visit",
		synopsis: "visit -url URL [-url URL…] -cluster CLUSTER [-selection EXPR] [-namespace NS -type T] [-field-set FS] [-slices N] [-share I/W] [-pages] [-o FILE [-checkpoint FILE]] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE] [-max-outage D] [-progress D] [-q]",
		about: "Reads the documents of a content cluster out through document/v1's\n" +
			"visits, N slices at once as the server allows, and writes them as feed\n" +
			"lines that retries feed reads back. With -checkpoint, the same command\n" +
			"goes on where a visit stopped, writing each document once.\n",
		exits: "  0  every slice visited to its end\n  1  the visit failed otherwise (an unwritable -o, a server's error)\n" + exitsBad + exitsInterrupted +
			"  4  a slice read nothing new for longer than -max-outage\n",
		flags: func(fs *flag.FlagSet) { addVisitFlags(fs, &visitFlags{}) },
	},
	{
		name:     "copy",
		synopsis: "copy -from URL [-from URL…] -to URL [-to URL…] -cluster CLUSTER [-selection EXPR] [-field-set FS] [-slices N] [-share I/W] [-checkpoint FILE] [-from-header 'Name: value'] [-from-header-file FILE] [-from-cert FILE -from-key FILE] [-from-ca FILE] [the feed's flags for the destination: -failed FILE, -max-outage D, -concurrency N, -http2, -header, -cert, …]",
		about: "Copies the documents of a content cluster from one Vespa to another:\n" +
			"visits the source as visit does and feeds each document to the\n" +
			"destination as feed does, the slices interleaved. With -checkpoint, the\n" +
			"same command goes on where a copy stopped, past every document the\n" +
			"destination acknowledged.\n",
		exits: "  0  every document visited and acknowledged\n  1  a document not copied (see -failed), or the source failed otherwise\n" + exitsBad + exitsInterrupted +
			"  4  the source or the destination was out for longer than -max-outage\n",
		flags: func(fs *flag.FlagSet) { addCopyFlags(fs, &copyFlags{}) },
	},
	{
		name:     "delete",
		synopsis: "delete -url URL [-url URL…] -cluster CLUSTER -selection EXPR [-namespace NS -type T] [-slices N] [-share I/W] [-checkpoint FILE] [-count] [-verify] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE] [-max-outage D] [-progress[=D]] [-q]",
		about: "Deletes every document that matches a selection, through document/v1's\n" +
			"delete by selection, N slices at once as the server allows; a request\n" +
			"that fails is asked again from its slice's last token, so that no\n" +
			"failure passes for the end. With -checkpoint, the same command goes on\n" +
			"where a run stopped.\n",
		exits: "  0  every slice done\n  1  the run failed otherwise, or -verify found documents left\n" + exitsBad + exitsInterrupted +
			"  4  a slice failed for longer than -max-outage\n",
		flags: func(fs *flag.FlagSet) { addBulkFlags(fs, &bulkFlags{}, false) },
	},
	{
		name:     "update",
		synopsis: "update -url URL [-url URL…] -cluster CLUSTER -namespace NS -type T -selection EXPR -update JSON|@FILE [-marker FIELD -checkpoint FILE] [every flag of delete]",
		about: "Applies an update to every document that matches a selection, as\n" +
			"delete deletes them. An update not safe to apply twice (an increment,\n" +
			"an add…) needs -marker FIELD, a string attribute of the type that each\n" +
			"document updated is marked with the run's id, and -checkpoint, which\n" +
			"keeps that id from before the first request: the same command run\n" +
			"again, after an interrupt or a kill, goes on with the same run and\n" +
			"applies the update once to each document. A second command on the\n" +
			"same checkpoint while one runs is refused (exit 2).\n",
		exits: "  0  every slice done\n  1  the run failed otherwise, or -verify found documents left\n" + exitsBad + exitsInterrupted +
			"  4  a slice failed for longer than -max-outage\n",
		flags: func(fs *flag.FlagSet) { addBulkFlags(fs, &bulkFlags{}, true) },
	},
	{
		name:     "deploy",
		synopsis: "deploy [-url CONFIG_SERVER] [-tenant default] [-application default] [-wait D] [-json FILE] [-q] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE] APP_DIR|APP.zip",
		about: "Deploys an application package (a directory, zipped with services.xml\n" +
			"at the root, or a .zip as it is) to a self-hosted config server, once:\n" +
			"after an answer lost on the way it reads the application's generation\n" +
			"and adopts one that landed rather than posting again, and it activates\n" +
			"a session the config server prepared but did not. Then, unless -wait 0,\n" +
			"waits as wait does for the new generation.\n",
		exits: controlExits,
		flags: func(fs *flag.FlagSet) { addControlFlags(fs, &controlFlags{}, false) },
	},
	{
		name:     "wait",
		synopsis: "wait [-url CONFIG_SERVER] [-tenant default] [-application default] [-generation G] [-wait D] [-json FILE] [-q] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE]",
		about: "Waits until a generation (the application's current one, or G) serves:\n" +
			"every service the config server lists runs it, and every container\n" +
			"answers up on /state/v1/health, read directly or through the config\n" +
			"server's proxy. Says what is behind as it moves, and prints the\n" +
			"services' table at the end.\n",
		exits: controlExits,
		flags: func(fs *flag.FlagSet) { addControlFlags(fs, &controlFlags{}, true) },
	},
	{
		name:     "bench",
		synopsis: "bench -url URL [-url URL…] -rate QPS|A:B:STEP [-duration D] [-deadline D] [-hedge auto|off] [-arrivals constant|poisson] [-assert EXPR[,EXPR…]] [-http2] [-json FILE] [-plot FILE.svg] [-slo D] [-header 'Name: value'] [-header-file FILE] [-cert FILE -key FILE] [-ca FILE] [-q] FILE|-",
		about: "Offers the queries of FILE (a path and query string a line, as\n" +
			"vespa-fbench reads them, or a JSON body) at QPS a second, open loop,\n" +
			"through package query: each query's deadline travels as its timeout,\n" +
			"a slow container is hedged within a budget. Reports latency from each\n" +
			"query's due time (and from its send), ok, degraded and failed answers\n" +
			"apart, and a row per endpoint; with A:B:STEP, the knee.\n",
		exits: "  0  it ran, whatever the answers: refused connections, a refused\n" +
			"     token or a cluster the server does not have included (the\n" +
			"     report's statuses say which), and every -assert held\n" +
			"  1  an -assert threshold was breached (each named on stderr)\n" +
			"  2  bad flags or input: a query FILE, a certificate, key or header\n" +
			"     file that cannot be read, a -json or -plot FILE that cannot be\n" +
			"     written\n" + exitsInterrupted,
		flags: func(fs *flag.FlagSet) { addBenchFlags(fs, &benchFlags{}) },
	},
	{
		name:     "version",
		synopsis: "version",
		about: "Prints the version this binary was built at: the release's, as\n" +
			"retries v0.4.0, when installed with go install …@v0.4.0.\n",
	},
}

// lookupCommand returns the command called name.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage is the help of the whole program: each command's synopsis and
// what it does, with its numeric flags' bounds and defaults.
var usage = buildUsage()

func buildUsage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  retries %s\n", c.synopsis)
		for line := range strings.Lines(c.about) {
			b.WriteString("      " + line)
		}
		if c.flags == nil {
			continue
		}
		fs := newFlagSet(c.name)
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			lo, hi, ok := flagBounds(f)
			if !ok {
				return
			}
			name, text := flag.UnquoteUsage(f)
			def := f.DefValue
			if _, zero, ok := strings.Cut(text, "; 0: "); ok && def == "0" {
				def += " (" + strings.TrimSuffix(zero, fmt.Sprintf(" (%s to %s)", lo, hi)) + ")"
			}
			fmt.Fprintf(&b, "        %-15s %s to %s, default %s\n", "-"+f.Name+" "+name, lo, hi, def)
		})
	}
	b.WriteString("  retries COMMAND -h, retries help COMMAND\n      the command's flags\n")
	return b.String()
}

// flagBounds returns the bounds of a numeric flag defined with intVar or
// floatVar.
func flagBounds(f *flag.Flag) (lo, hi string, ok bool) {
	switch v := f.Value.(type) {
	case *boundedInt:
		return strconv.Itoa(v.lo), strconv.Itoa(v.hi), true
	case *boundedFloat:
		return fmtFloat(v.lo), fmtFloat(v.hi), true
	}
	return "", "", false
}

func newFlagSet(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ContinueOnError)
}

// shortUsage is what a usage error of the command name prints after the
// error: its synopsis and where its flags are, or the whole usage for a
// name that is no command.
func shortUsage(name string) string {
	c, ok := lookupCommand(name)
	if !ok {
		return usage
	}
	synopsis := c.synopsis
	if strings.HasPrefix(synopsis, "[") { // the default command, named
		synopsis = strings.Trim(synopsis, "[]")
	}
	return fmt.Sprintf("usage: retries %s\n'retries %s -h' says what it does, its flags and its exit statuses\n", synopsis, name)
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
	c, _ := lookupCommand(fs.Name())
	synopsis := c.synopsis
	if strings.HasPrefix(synopsis, "[") { // the default command, named
		synopsis = strings.Trim(synopsis, "[]")
	}
	fmt.Fprintf(&b, "usage: retries %s\n\n%s", synopsis, c.about)
	if c.exits != "" {
		b.WriteString("\nexit status:\n" + c.exits)
	}
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
