package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
		{"negative_attempts", []string{"schedule", "query", "-attempts", "-1"}, "-attempts -1: must not be negative"},
		{"negative_samples", []string{"schedule", "-samples=-5", "query"}, "-samples -5: must not be negative"},
		{"zero_samples", []string{"schedule", "query", "-samples", "0"}, "-samples 0: must be between"},
		{"bad_number", []string{"schedule", "query", "-attempts", "many"}, "invalid value"},
		{"too_many_attempts", []string{"schedule", "query", "-attempts", "201"}, "-attempts 201: at most 200"},
		{"too_many_samples", []string{"schedule", "query", "-samples", "100001"}, "-samples 100001: must be between 1 and 100000"},
		{"too_many_workers", []string{"demo", "-concurrency", "1025"}, "-concurrency 1025: at most 1024"},
		{"too_many_docs", []string{"demo", "-docs", "1000001"}, "-docs 1000001: at most 1000000"},
		{"negative_docs", []string{"demo", "-docs", "-1"}, "-docs -1: must not be negative"},
		{"negative_rate", []string{"demo", "-rate", "-5"}, "-rate -5: must not be negative"},
		{"zero_rate", []string{"demo", "-rate", "0"}, "-rate 0: must be a positive number"},
		{"negative_concurrency", []string{"demo", "-concurrency", "-2"}, "-concurrency -2: must not be negative"},
		{"negative_fault_rate", []string{"demo", "-fault-rate", "-0.1"}, "-fault-rate -0.1: must not be negative"},
		{"negative_reset_rate", []string{"demo", "-reset-rate", "-0.1"}, "-reset-rate -0.1: must not be negative"},
		{"fault_rates_over_one", []string{"demo", "-fault-rate", "0.8", "-reset-rate", "0.5"}, "add up to more than 1"},
		{"unknown_flag", []string{"policies", "-x"}, "flag provided but not defined: -x"},
		{"policies_argument", []string{"policies", "extra"}, `unexpected argument "extra"`},
		{"demo_argument", []string{"demo", "now"}, `unexpected argument "now"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != exitUsage {
				t.Errorf("run(%q) = %d, want %d", tc.args, code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("run(%q) wrote to stdout:\n%s", tc.args, stdout)
			}
			first, rest, _ := strings.Cut(stderr, "\n")
			if !strings.HasPrefix(first, "retries: ") || !strings.Contains(first, tc.want) {
				t.Errorf("run(%q) error line = %q, want retries: …%s…", tc.args, first, tc.want)
			}
			if rest != usage {
				t.Errorf("run(%q) after the error line printed:\n%s\nwant the usage:\n%s", tc.args, rest, usage)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"schedule", "-h"}, {"demo", "-help"}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != exitOK || stdout != usage || stderr != "" {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, stdout, stderr)
		}
	}
}
