package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/seed32e55400/retries"
)

// attemptCap is how far attemptsOf looks for a stop: a policy that has not
// stopped after this many attempts is taken to never give up.
const attemptCap = 10000

// envelopeCap bounds the rows shown for a policy that never gives up, in
// case its waits never settle.
const envelopeCap = 64

// policyRow is what the policies table says about one policy.
type policyRow struct {
	name       string
	retry      string // p.Retry().String()
	stop       string // p.Stop().String()
	wait       string // p.Wait().String()
	attempts   int    // 0 when the policy never gives up
	exhaustion string // what comes back on giving up, found by running it
	envelope   []envelopeRow
	// expected and worst are the mean and greatest total wait of a call that
	// gives up; for a policy that never gives up, worst is the cap the waits
	// settle at.
	expected, worst time.Duration
}

// envelopeRow is the range of the wait that follows attempt n.
type envelopeRow struct {
	n              int
	onwards        bool // the row stands for attempt n and every later one
	min, mean, max time.Duration
}

// attemptsOf returns how many attempts s allows, by asking it after attempt
// 1, 2, … which one it gives up after; ok is false if it has not given up
// after attemptCap attempts.
func attemptsOf(s retries.Stop) (n int, ok bool) {
	for k := 1; k <= attemptCap; k++ {
		if s.Check(retries.State{Attempt: k}) {
			return k, true
		}
	}
	return 0, false
}

// envelopeOf returns the bounds of every wait a policy that makes attempts
// attempts sleeps, with mean (min+max)/2, which holds for the uniform draws
// of every random wait in the package's policies (schedule_test.go checks
// it by sampling). When attempts is 0 (never gives up) it lists the waits
// until they stop changing; the last row then stands for every later wait.
func envelopeOf(w retries.Wait, attempts int) []envelopeRow {
	var rows []envelopeRow
	row := func(n int) envelopeRow {
		lo, hi := w.Bounds(retries.State{Attempt: n})
		return envelopeRow{n: n, min: lo, mean: lo + (hi-lo)/2, max: hi}
	}
	if attempts > 0 {
		for n := 1; n < attempts; n++ {
			rows = append(rows, row(n))
		}
		return rows
	}
	for n := 1; n <= envelopeCap; n++ {
		r := row(n)
		if k := len(rows); k > 0 && rows[k-1].min == r.min && rows[k-1].max == r.max {
			rows[k-1].onwards = true
			return rows
		}
		rows = append(rows, r)
	}
	return rows
}

// Exhaustion labels.
const (
	exhRetryError   = "RetryError"
	exhLastError    = "last error"
	exhLastResponse = "last response"
	exhLastOutcome  = "last outcome"
	exhNever        = "-"
)

// probe is an outcome that an attempt can end with, to find out what a
// policy gives back when it gives up on it.
type probe struct {
	resp *http.Response
	err  error
}

// probes returns fresh failing outcomes of every kind the policies retry:
// plain errors, connection errors, status errors, and 429 and 503 responses.
func probes() []probe {
	resp := func(code int) *http.Response {
		return &http.Response{StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code), Body: http.NoBody}
	}
	return []probe{
		{err: errors.New("probe: failure")},
		{err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}},
		{err: &retries.StatusError{StatusCode: 503, Status: "503 Service Unavailable", Method: "GET", URL: "http://probe/"}},
		{resp: resp(http.StatusServiceUnavailable)},
		{resp: resp(http.StatusTooManyRequests)},
	}
}

// exhaustionOf finds out what p returns when it gives up, by running it with
// its wait removed on each probe it retries, failing every time. It must only
// be called for a policy that gives up.
func exhaustionOf(p retries.Policy) string {
	p = p.Copy(retries.WithWait(retries.WaitNone()))
	seen := map[string]bool{}
	for _, pr := range probes() {
		var v any
		if pr.resp != nil {
			v = pr.resp
		}
		if !p.Retry().Match(v, pr.err) {
			continue
		}
		got, err := retries.DoValue(context.Background(), p, func(context.Context) (*http.Response, error) {
			return pr.resp, pr.err
		})
		var re *retries.RetryError
		switch {
		case errors.As(err, &re):
			seen[exhRetryError] = true
		case pr.err != nil && err == pr.err:
			seen[exhLastError] = true
		case pr.resp != nil && err == nil && got == pr.resp:
			seen[exhLastResponse] = true
		default:
			seen[fmt.Sprintf("%T, %v", got, err)] = true
		}
	}
	if seen[exhLastError] && seen[exhLastResponse] {
		delete(seen, exhLastError)
		delete(seen, exhLastResponse)
		seen[exhLastOutcome] = true
	}
	labels := make([]string, 0, len(seen))
	for l := range seen {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	return strings.Join(labels, " or ")
}

// describePolicy gathers the table's facts about p.
func describePolicy(np namedPolicy) policyRow {
	p := np.policy
	r := policyRow{
		name:  np.name,
		retry: p.Retry().String(),
		stop:  p.Stop().String(),
		wait:  p.Wait().String(),
	}
	n, ok := attemptsOf(p.Stop())
	if ok {
		r.attempts = n
		r.exhaustion = exhaustionOf(p)
	} else {
		r.exhaustion = exhNever
	}
	r.envelope = envelopeOf(p.Wait(), r.attempts)
	for _, e := range r.envelope {
		r.expected += e.mean
		r.worst += e.max
	}
	if !ok && len(r.envelope) > 0 {
		r.expected = 0
		r.worst = r.envelope[len(r.envelope)-1].max
	}
	return r
}

// runPolicies is the policies command.
func runPolicies(args []string, stdout io.Writer) error {
	fs := newFlagSet("policies")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("policies: unexpected argument %q", pos[0])
	}
	rows := make([]policyRow, 0, 7)
	for _, np := range allPolicies() {
		rows = append(rows, describePolicy(np))
	}
	return writePolicies(stdout, rows)
}

// writePolicies prints the policies table: a summary, what each policy
// retries and how it waits, and the wait envelope.
func writePolicies(out io.Writer, rows []policyRow) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "The seven retry policies of package retries (pyvespa's vespa.retries).")
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "POLICY\tATTEMPTS\tON EXHAUSTION\tTOTAL WAIT BEFORE GIVING UP")
	for _, r := range rows {
		att, total := strconv.Itoa(r.attempts), fmt.Sprintf("expected %s, worst case %s", secs(r.expected), secs(r.worst))
		if r.attempts == 0 {
			att, total = "never", fmt.Sprintf("never gives up; waits capped at %s", secs(r.worst))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, att, r.exhaustion, total)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "POLICY\tRETRIES\tSTOP")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.retry, r.stop)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "POLICY\tWAIT (n is the attempt that just failed)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r.name, r.wait)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "Wait envelope in seconds: the wait after attempt n, before attempt n+1.")
	// The policy column is left-aligned and the numbers right-aligned.
	width := len("POLICY")
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	line := func(name, n, lo, mean, hi string) {
		fmt.Fprintf(out, "%-*s  %13s  %7s  %7s  %7s\n", width, name, n, lo, mean, hi)
	}
	line("POLICY", "AFTER ATTEMPT", "MIN", "MEAN", "MAX")
	for _, r := range rows {
		if len(r.envelope) == 0 {
			line(r.name, "no wait", "", "", "")
		}
		for _, e := range r.envelope {
			n := strconv.Itoa(e.n)
			if e.onwards {
				n += " and later"
			}
			line(r.name, n, num(e.min), num(e.mean), num(e.max))
		}
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "ON EXHAUSTION is what each policy returned when run without its waits on an")
	fmt.Fprintln(out, "outcome it retries every time:")
	fmt.Fprintf(out, "  %-13s a *retries.RetryError wrapping the last error or response\n", exhRetryError)
	fmt.Fprintf(out, "  %-13s the last error itself\n", exhLastError)
	fmt.Fprintf(out, "  %-13s the last error itself, or the last response with a nil error\n", exhLastOutcome)
	fmt.Fprintln(out, "MEAN is (MIN+MAX)/2: every random wait here is uniform between MIN and MAX.")
	_, err := fmt.Fprintln(out, "A call that gives up sleeps every wait up to its last attempt: the totals add them up.")
	return err
}

// num formats d in seconds with at most four decimals: 1.5, 0.2618, 0.
func num(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', 4, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// secs formats d in seconds with a unit: "22.5 s".
func secs(d time.Duration) string { return num(d) + " s" }
