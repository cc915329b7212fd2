package main

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

func TestPoliciesTable(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, "policies")
	if code != exitOK || stderr != "" {
		t.Fatalf("run(policies) = %d, stderr %q", code, stderr)
	}
	golden(t, "policies.golden", out)
	if code, def, _ := runCmd(t); code != exitOK || def != out {
		t.Errorf("run() with no arguments = %d and a different output; want the policies table", code)
	}

	summary := table(t, out, "POLICY  ATTEMPTS")
	var names, attempts, exhaustion []string
	totals := map[string]string{}
	for _, r := range summary {
		if len(r) != 4 {
			t.Fatalf("summary row %q has %d cells, want 4", r, len(r))
		}
		names, attempts, exhaustion = append(names, r[0]), append(attempts, r[1]), append(exhaustion, r[2])
		totals[r[0]] = r[3]
	}
	for _, c := range []struct {
		column    string
		got, want []string
	}{
		{"POLICY", names, []string{"Query", "DocV1", "Throttle", "SyncRequest", "Visit", "ControlPlane", "URLValidation"}},
		{"ATTEMPTS", attempts, []string{"5", "3", "never", "11", "3", "3", "3"}},
		{"ON EXHAUSTION", exhaustion, []string{"RetryError", "last outcome", "-", "last outcome", "RetryError", "last error", "last error"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("column %s = %q, want %q", c.column, c.got, c.want)
		}
	}
	for name, want := range map[string]string{
		"Query":       "expected 11.25 s, worst case 22.5 s",
		"DocV1":       "expected 3 s, worst case 3 s",
		"Throttle":    "never gives up; waits capped at 10 s",
		"SyncRequest": "expected 24.7356 s, worst case 29.7356 s",
		"Visit":       "expected 0 s, worst case 0 s",
	} {
		if totals[name] != want {
			t.Errorf("total wait of %s = %q, want %q", name, totals[name], want)
		}
	}

	retried := map[string][]string{}
	for _, r := range table(t, out, "POLICY  RETRIES") {
		retried[r[0]] = r[1:]
	}
	if got, want := retried["DocV1"], []string{"RetryAny(RetryIfAnyError(), RetryIfStatus(503))", "StopAfterAttempt(3)"}; !slices.Equal(got, want) {
		t.Errorf("DocV1 retries, stop = %q, want %q", got, want)
	}
	if got, want := retried["Throttle"], []string{"RetryIfStatus(429)", "StopNever()"}; !slices.Equal(got, want) {
		t.Errorf("Throttle retries, stop = %q, want %q", got, want)
	}

	// The envelope: policy, attempt, min, mean, max.
	env := map[string][][]string{}
	for _, r := range table(t, out, "POLICY  AFTER ATTEMPT") {
		env[r[0]] = append(env[r[0]], r[1:])
	}
	for _, tc := range []struct {
		policy string
		want   [][]string
	}{
		{"Query", [][]string{{"1", "0", "0.75", "1.5"}, {"2", "0", "1.5", "3"}, {"3", "0", "3", "6"}, {"4", "0", "6", "12"}}},
		{"DocV1", [][]string{{"1", "1", "1", "1"}, {"2", "2", "2", "2"}}},
		{"Throttle", [][]string{{"1", "0", "0.5", "1"}, {"2", "0", "1", "2"}, {"3", "0", "2", "4"}, {"4", "0", "4", "8"}, {"5 and later", "0", "5", "10"}}},
		{"Visit", [][]string{{"1", "0", "0", "0"}, {"2", "0", "0", "0"}}},
		{"ControlPlane", [][]string{{"1", "1", "1", "1"}, {"2", "2", "2", "2"}}},
		{"URLValidation", [][]string{{"1", "1", "1", "1"}, {"2", "2", "2", "2"}}},
	} {
		if got := env[tc.policy]; !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("envelope of %s = %q, want %q", tc.policy, got, tc.want)
		}
	}
	if got := len(env["SyncRequest"]); got != 10 {
		t.Errorf("SyncRequest has %d envelope rows, want 10 (11 attempts)", got)
	}
	if got, want := env["SyncRequest"][9], []string{"10", "7.5999", "8.0999", "8.5999"}; !slices.Equal(got, want) {
		t.Errorf("SyncRequest's 10th wait = %q, want %q", got, want)
	}
}

func TestAttemptsOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stop   retries.Stop
		want   int
		wantOK bool
	}{
		{"after_one", retries.StopAfterAttempt(1), 1, true},
		{"after_zero_means_one", retries.StopAfterAttempt(0), 1, true},
		{"after_seven", retries.StopAfterAttempt(7), 7, true},
		{"zero_stop", retries.Stop{}, 1, true},
		{"any_of_attempts_and_delay", retries.StopAny(retries.StopAfterDelay(time.Hour), retries.StopAfterAttempt(4)), 4, true},
		{"never", retries.StopNever(), 0, false},
		{"past_the_cap", retries.StopAfterAttempt(attemptCap + 1), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := attemptsOf(tc.stop)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("attemptsOf(%v) = %d, %v, want %d, %v", tc.stop, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestExhaustionOf checks that the exhaustion column comes from what a policy
// does, not from its name: policies built here give each answer.
func TestExhaustionOf(t *testing.T) {
	t.Parallel()
	three := retries.WithStop(retries.StopAfterAttempt(3))
	// values503 retries 503 responses only (RetryIfStatus also retries a
	// *StatusError).
	values503 := retries.WithRetry(retries.RetryIfValue(func(v any) bool {
		r, ok := v.(*http.Response)
		return ok && r.StatusCode == http.StatusServiceUnavailable
	}))
	for _, tc := range []struct {
		name   string
		policy retries.Policy
		want   string
	}{
		{"default", retries.New(three), exhRetryError},
		{"reraise", retries.New(three, retries.WithReraise(true)), exhLastError},
		{"last_outcome_errors_only", retries.New(three, retries.WithOnExhausted(retries.ReturnLastOutcome)), exhLastError},
		{"last_outcome_values_only", retries.New(three, values503, retries.WithOnExhausted(retries.ReturnLastOutcome)), exhLastResponse},
		{"last_outcome_status", retries.New(three, retries.WithRetry(retries.RetryIfStatus(503)), retries.WithOnExhausted(retries.ReturnLastOutcome)), exhLastOutcome},
		{"last_outcome_both", retries.New(three, retries.WithRetry(retries.RetryAny(retries.RetryIfAnyError(), retries.RetryIfStatus(429))), retries.WithOnExhausted(retries.ReturnLastOutcome)), exhLastOutcome},
		{"reraise_with_values_only", retries.New(three, values503, retries.WithReraise(true)), exhRetryError},
		{"reraise_with_status", retries.New(three, retries.WithRetry(retries.RetryIfStatus(503)), retries.WithReraise(true)), exhRetryError + " or " + exhLastError},
		{"custom_callback", retries.New(three, retries.WithOnExhausted(func(retries.State) error { return errors.New("gave up") })), "*http.Response, gave up"},
		{"slow_policy_without_its_wait", retries.New(three, retries.WithWait(retries.WaitFixed(time.Hour)), retries.WithReraise(true)), exhLastError},
		{"Query", retries.Query, exhRetryError},
		{"DocV1", retries.DocV1, exhLastOutcome},
		{"SyncRequest", retries.SyncRequest, exhLastOutcome},
		{"Visit", retries.Visit, exhRetryError},
		{"ControlPlane", retries.ControlPlane, exhLastError},
		{"URLValidation", retries.URLValidation, exhLastError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := exhaustionOf(tc.policy); got != tc.want {
				t.Errorf("exhaustionOf(%v) = %q, want %q", tc.policy, got, tc.want)
			}
		})
	}
}

// TestProbesUseAllAttempts checks that the probes fail on every attempt, so
// that the exhaustion column describes a policy that gave up: each policy
// makes as many calls as its stop allows.
func TestProbesUseAllAttempts(t *testing.T) {
	t.Parallel()
	for _, np := range allPolicies() {
		want, ok := attemptsOf(np.policy.Stop())
		if !ok {
			continue
		}
		p := np.policy.Copy(retries.WithWait(retries.WaitNone()))
		for i, pr := range probes() {
			var v any
			if pr.resp != nil {
				v = pr.resp
			}
			if !p.Retry().Match(v, pr.err) {
				continue
			}
			calls := 0
			_, _ = retries.DoValue(context.Background(), p, func(context.Context) (*http.Response, error) {
				calls++
				return pr.resp, pr.err
			})
			if calls != want {
				t.Errorf("%s on probe %d: %d calls, want %d", np.name, i, calls, want)
			}
		}
	}
}

// TestEnvelopeMeanMatchesSampling checks the claim the table makes: every
// wait lies between the MIN and MAX it prints, and its mean is (MIN+MAX)/2,
// by sampling each wait of each policy.
func TestEnvelopeMeanMatchesSampling(t *testing.T) {
	t.Parallel()
	const k = 20000
	for _, np := range allPolicies() {
		t.Run(np.name, func(t *testing.T) {
			t.Parallel()
			row := describePolicy(np)
			w := np.policy.Wait()
			for _, e := range row.envelope {
				ns := []int{e.n}
				if e.onwards {
					ns = append(ns, e.n+1, e.n+20, e.n+1000)
				}
				for _, n := range ns {
					var sum float64
					for range k {
						d := w.Duration(retries.State{Attempt: n})
						if d < e.min || d > e.max {
							t.Fatalf("wait after attempt %d = %v, outside [%v, %v]", n, d, e.min, e.max)
						}
						sum += float64(d)
					}
					mean := sum / k
					// Six standard errors of the mean of a uniform draw.
					tol := 6*float64(e.max-e.min)/math.Sqrt(12*k) + 1
					if math.Abs(mean-float64(e.mean)) > tol {
						t.Errorf("sampled mean wait after attempt %d = %v, want %v ± %v", n, time.Duration(mean), e.mean, time.Duration(tol))
					}
				}
			}
		})
	}
}

func TestNum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{1500 * time.Millisecond, "1.5"},
		{22500 * time.Millisecond, "22.5"},
		{261792400, "0.2618"},
		{10 * time.Second, "10"},
		{50 * time.Microsecond, "0.0001"},
	} {
		if got := num(tc.d); got != tc.want {
			t.Errorf("num(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := secs(3 * time.Second); !strings.HasSuffix(got, " s") {
		t.Errorf("secs(3s) = %q, want a unit", got)
	}
}
