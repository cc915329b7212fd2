package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// runCmd runs the command line args and returns its exit status and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var columnSep = regexp.MustCompile(`\s{2,}`)

// table returns the rows of the table in out whose header line starts with
// header, split into cells on runs of two or more spaces, up to the next
// blank line.
func table(t *testing.T, out, header string) [][]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	want := columnSep.Split(header, -1)
	for i, l := range lines {
		cells := columnSep.Split(strings.TrimSpace(l), -1)
		if len(cells) < len(want) || !slices.Equal(cells[:len(want)], want) {
			continue
		}
		var rows [][]string
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			rows = append(rows, columnSep.Split(strings.TrimSpace(l), -1))
		}
		return rows
	}
	t.Fatalf("no table with header %q in:\n%s", header, out)
	return nil
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"unknown_command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown_policy", []string{"schedule", "nope"}, `unknown policy "nope"`},
		{"misspelt_all", []string{"schedule", "al"}, `unknown policy "al"`},
		{"missing_policy", []string{"schedule"}, "missing POLICY"},
		{"two_policies", []string{"schedule", "query", "visit"}, `unexpected argument "visit"`},
		{"unknown_flag", []string{"policies", "-x"}, "flag provided but not defined: -x"},
		{"policies_argument", []string{"policies", "extra"}, `unexpected argument "extra"`},
		{"demo_argument", []string{"demo", "now"}, `unexpected argument "now"`},
		{"help_unknown_command", []string{"help", "frobnicate"}, `help: want one of policies, schedule, demo, feed, visit, copy, delete, update, bench, deploy, wait or version, got ["frobnicate"]`},
		{"help_two_commands", []string{"help", "demo", "schedule"}, `help: want one of`},
		{"fault_rates_over_one", []string{"demo", "-fault-rate", "0.8", "-reset-rate", "0.5"}, "add up to more than 1"},
		// At 1 request/s, 3601 documents take at least 3601 s.
		{"demo_over_an_hour", []string{"demo", "-docs", "3601", "-rate", "1"}, "-docs 3601 at -rate 1: takes at least 3601 s, more than the 3600 s allowed"},
		{"demo_over_an_hour_max_docs", []string{"demo", "-docs", "1000000", "-rate", "277"}, "takes at least 3610 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkUsageError(t, tc.args, tc.want)
		})
	}
}

// checkUsageError runs args and checks that it exits 2 with an error line
// containing want, followed by the command's usage line and where its
// flags are (or the whole usage for no command), and nothing on stdout. The
// context is already canceled, so that a demo that wrongly starts stops at
// once instead of running for as long as its flags say.
func checkUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	code := runContext(ctx, args, &out, &errOut)
	stdout, stderr := out.String(), errOut.String()
	if code != exitUsage {
		t.Errorf("run(%q) = %d, want %d", args, code, exitUsage)
	}
	if stdout != "" {
		t.Errorf("run(%q) wrote to stdout:\n%s", args, stdout)
	}
	first, rest, _ := strings.Cut(stderr, "\n")
	if !strings.HasPrefix(first, "retries: ") || !strings.Contains(first, want) {
		t.Errorf("run(%q) error line = %q, want retries: …%s…", args, first, want)
	}
	cmd := "policies"
	if len(args) > 0 {
		cmd = args[0]
	}
	if want := shortUsage(cmd); rest != want {
		t.Errorf("run(%q) after the error line printed:\n%s\nwant the command's usage:\n%s", args, rest, want)
	}
}

// numericFlags lists every numeric flag of every command with its bounds,
// as the usage states them.
var numericFlags = []struct {
	cmd, flag string
	lo, hi    string
	def       string
	float     bool
}{
	{"schedule", "attempts", "0", "200", "0", false},
	{"schedule", "samples", "1", "100000", "10000", false},
	{"demo", "docs", "1", "1000000", "2000", false},
	{"demo", "rate", "1", "1000000", "500", true},
	{"demo", "concurrency", "1", "1024", "32", false},
	{"demo", "fault-rate", "0", "1", "0.002", true},
	{"demo", "reset-rate", "0", "1", "0.0015", true},
	{"feed", "concurrency", "0", "4096", "0", false},
	{"feed", "connections", "0", "4096", "0", false},
}

// TestFlagBounds gives every numeric flag values outside its bounds, NaN,
// infinities and words: each is refused with exit status 2, the flag's name
// and its bounds.
func TestFlagBounds(t *testing.T) {
	t.Parallel()
	for _, f := range numericFlags {
		bounds := fmt.Sprintf("must be between %s and %s", f.lo, f.hi)
		// Outside the bounds, and not numbers of the flag's kind.
		outside := []string{fmt.Sprint(mustAtoi(t, f.lo) - 1), fmt.Sprint(mustAtoi(t, f.hi) + 1), "99999999999999999999", "-99999999999999999999"}
		notNumbers := []string{"many", "", "0x", "NaN"}
		if f.float {
			outside = append(outside, "Inf", "+Inf", "-Inf", "1e400", "-1e400", f.hi+".0001")
			if f.lo == "1" {
				outside = append(outside, "1e-9", "0.999")
			}
		} else {
			notNumbers = append(notNumbers, "Inf", "-Inf", "1e400", "1.5", "1e3")
		}
		prefix := "not a number: "
		if !f.float {
			prefix = "not a whole number: "
		}
		var values [][2]string
		for _, v := range outside {
			values = append(values, [2]string{v, bounds})
		}
		for _, v := range notNumbers {
			values = append(values, [2]string{v, prefix + bounds})
		}
		for _, v := range values {
			args := []string{f.cmd, "-" + f.flag, v[0]}
			if f.cmd == "schedule" {
				args = append(args, "query")
			}
			t.Run(f.cmd+"_"+f.flag+"_"+v[0], func(t *testing.T) {
				t.Parallel()
				checkUsageError(t, args, fmt.Sprintf("%s: invalid value %q for flag -%s: %s", f.cmd, v[0], f.flag, v[1]))
			})
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFlagBoundsAccepted checks that each bound itself is accepted.
func TestFlagBoundsAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want demoFlags
	}{
		{"lower", []string{"-docs", "1", "-rate", "1", "-concurrency", "1", "-fault-rate", "0", "-reset-rate", "0"}, demoFlags{1, 1, 1, 0, 0, true}},
		{"upper", []string{"-docs", "1000000", "-rate", "1000000", "-concurrency", "1024", "-fault-rate", "1", "-reset-rate", "0"}, demoFlags{1000000, 1000000, 1024, 1, 0, true}},
		{"rates_add_up_to_one", []string{"-fault-rate", "0.25", "-reset-rate", "0.75"}, demoFlags{defaultDocs, defaultRate, defaultConcurrency, 0.25, 0.75, true}},
		{"exactly_an_hour", []string{"-docs", "3600", "-rate", "1"}, demoFlags{3600, 1, defaultConcurrency, defaultFaultRate, defaultResetRate, true}},
		{"negative_zero_is_zero", []string{"-fault-rate", "-0", "-reset-rate", "-0"}, demoFlags{defaultDocs, defaultRate, defaultConcurrency, 0, 0, true}},
		{"defaults", nil, demoFlags{defaultDocs, defaultRate, defaultConcurrency, defaultFaultRate, defaultResetRate, true}},
		{"no_baseline", []string{"-baseline=false"}, demoFlags{defaultDocs, defaultRate, defaultConcurrency, defaultFaultRate, defaultResetRate, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseDemoFlags(tc.args)
			if err != nil || got != tc.want {
				t.Errorf("parseDemoFlags(%q) = %+v, %v, want %+v", tc.args, got, err, tc.want)
			}
			if math.Signbit(got.faultRate) || math.Signbit(got.resetRate) {
				t.Errorf("parseDemoFlags(%q) kept a negative zero: %+v", tc.args, got)
			}
		})
	}
	code, out, stderr := runCmd(t, "schedule", "query", "-attempts", "200", "-samples", "1")
	if code != exitOK || stderr != "" || !strings.Contains(out, "no wait follows attempt 5") {
		t.Errorf("run(schedule query -attempts 200 -samples 1) = %d, stderr %q:\n%s", code, stderr, out)
	}
}

// TestBoundsDocumented checks that the usage, derived from the flags,
// states each numeric flag's bounds and default, as the flag's own help
// does.
func TestBoundsDocumented(t *testing.T) {
	t.Parallel()
	for _, f := range numericFlags {
		fs := newFlagSet(f.cmd)
		switch f.cmd {
		case "demo":
			addDemoFlags(fs, &demoFlags{})
		case "schedule":
			addScheduleFlags(fs, &scheduleFlags{})
		case "feed":
			addFeedFlags(fs, &feedFlags{})
		}
		fl := fs.Lookup(f.flag)
		if fl == nil {
			t.Errorf("%s has no flag -%s", f.cmd, f.flag)
			continue
		}
		bounds := fmt.Sprintf("%s to %s", f.lo, f.hi)
		if !strings.Contains(fl.Usage, "("+bounds+")") || fl.DefValue != f.def {
			t.Errorf("%s -%s: usage %q, default %q; want (%s) and default %s", f.cmd, f.flag, fl.Usage, fl.DefValue, bounds, f.def)
		}
		inUsage := regexp.MustCompile(`(?m)^ +-` + regexp.QuoteMeta(f.flag) + ` [A-Z] +` + bounds + `( requests/s)?, default ` + regexp.QuoteMeta(f.def) + `\b`)
		if !inUsage.MatchString(usage) {
			t.Errorf("usage does not state -%s %s, default %s:\n%s", f.flag, bounds, f.def, usage)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"-help"}, {"--help"}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != exitOK || stdout != usage || stderr != "" {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, stdout, stderr)
		}
	}
}

// TestCommandHelp checks that -h after a command, or help before it, prints
// that command's own help on stdout and exits 0: its synopsis, and each flag
// with its bounds.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"policies", []string{"usage: retries policies\n", "No flags."}},
		{"schedule", []string{
			"usage: retries schedule POLICY|all [-attempts N] [-samples K] [-svg FILE]\n",
			"  -attempts N\n", "(0 to 200)",
			"  -samples K\n", "K sampled schedules (1 to 100000) (default 10000)",
			"  -svg FILE\n",
		}},
		{"demo", []string{
			"usage: retries demo [-docs N] [-rate R] [-concurrency C] [-fault-rate F] [-reset-rate F] [-baseline=false]\n",
			"  -docs N\n", "(1 to 1000000) (default 2000)",
			"  -rate R\n", "requests per second (1 to 1000000) (default 500)",
			"  -concurrency C\n", "(1 to 1024) (default 32)",
			"  -fault-rate F\n", "(0 to 1) (default 0.002)",
			"  -reset-rate F\n", "(0 to 1) (default 0.0015)",
			"at most 3600 s",
		}},
	} {
		var first string
		for _, args := range [][]string{{tc.cmd, "-h"}, {tc.cmd, "-help"}, {tc.cmd, "--help"}, {"help", tc.cmd}} {
			code, stdout, stderr := runCmd(t, args...)
			if code != exitOK || stderr != "" {
				t.Errorf("run(%q) = %d, stderr %q; want 0 and nothing on stderr", args, code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("run(%q) output lacks %q:\n%s", args, w, stdout)
				}
			}
			if first == "" {
				first = stdout
			} else if stdout != first {
				t.Errorf("run(%q) printed a different help than run(%q):\n%s", args, []string{tc.cmd, "-h"}, stdout)
			}
		}
	}
}

// TestSetupErrorWithoutUsage: an error of the setup rather than of the
// command line (an input that cannot be opened, a checkpoint refused)
// exits 2 with its cause alone: the usage would bury it.
func TestSetupErrorWithoutUsage(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	var out, errOut bytes.Buffer
	code := runContext(t.Context(), []string{"feed", "-q", "-url", "http://127.0.0.1:1", missing}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "missing.jsonl") || strings.Contains(errOut.String(), usage) ||
		strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("feed of a missing file: exit %d, stderr:\n%s\nwant exit 2 and one line naming the file", code, errOut.String())
	}
}

// exits2 reports whether err makes the command exit 2: a usage or setup
// error.
func exits2(err error) bool {
	var u *usageError
	var s *setupError
	return errors.As(err, &u) || errors.As(err, &s)
}

// TestUsageErrorIsShort: a usage error of a command prints three lines,
// the error, the command's usage line whole and where its flags are, so
// that the error does not scroll away under the usage of every command
// (55 lines before); a word that is no command gets the whole usage.
func TestUsageErrorIsShort(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"feed", "visit", "copy", "schedule", "demo"} {
		code, _, stderr := runCmd(t, cmd, "-no-such-flag")
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		c, _ := lookupCommand(cmd)
		if code != exitUsage || len(lines) != 3 || lines[0] != "retries: "+cmd+": flag provided but not defined: -no-such-flag" ||
			lines[1] != "usage: retries "+c.synopsis || lines[2] != "'retries "+cmd+" -h' says what it does, its flags and its exit statuses" {
			t.Errorf("%s -no-such-flag: exit %d, stderr:\n%s", cmd, code, stderr)
		}
	}
	if code, _, stderr := runCmd(t, "vist"); code != exitUsage || !strings.HasSuffix(stderr, usage) {
		t.Errorf("an unknown command: exit %d, stderr:\n%s\nwant the whole usage", code, stderr)
	}
}

// TestHelpListsExitStatuses: the help of each command that talks to
// Vespa lists its exit statuses, 0 to 4, each once.
func TestHelpListsExitStatuses(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"feed", "visit", "copy"} {
		code, stdout, _ := runCmd(t, cmd, "-h")
		_, exits, ok := strings.Cut(stdout, "\nexit status:\n")
		exits, _, _ = strings.Cut(exits, "\n\n")
		if code != exitOK || !ok {
			t.Fatalf("%s -h: exit %d, no exit statuses:\n%s", cmd, code, stdout)
		}
		for s := range 5 {
			if n := strings.Count(exits, fmt.Sprintf("\n  %d  ", s)) + boolInt(strings.HasPrefix(exits, fmt.Sprintf("  %d  ", s))); n != 1 {
				t.Errorf("%s -h: exit status %d listed %d times:\n%s", cmd, s, n, exits)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// deadURL returns the URL of a port on which nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// readState reads the checkpoint at path, of kind, into v: the file is
// {"checkpoint": 1, "kind": KIND, "state": {…}}.
func readState(path, kind string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c struct {
		Version int             `json:"checkpoint"`
		Kind    string          `json:"kind"`
		State   json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	if c.Version != 1 || c.Kind != kind {
		return fmt.Errorf("%s: a checkpoint of version %d and kind %q, want 1 and %q", path, c.Version, c.Kind, kind)
	}
	return json.Unmarshal(c.State, v)
}
