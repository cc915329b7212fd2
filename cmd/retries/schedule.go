package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
)

const (
	defaultSamples = 10000
	maxSamples     = 100000
	maxAttempts    = 200 // with maxSamples, at most 20 million sampled waits
	// neverWaits is how many waits schedule shows by default for a policy
	// that never gives up.
	neverWaits = 12
	barWidth   = 40
)

// waitStats summarises the wait after attempt n over the sampled schedules.
type waitStats struct {
	n                  int
	lo, hi             time.Duration // the wait's bounds, from Wait.Bounds
	min, p50, p95, max time.Duration // over the samples
}

// random reports whether the wait can take more than one value.
func (s waitStats) random() bool { return s.lo != s.hi }

// schedule is the sampled waits of one policy.
type schedule struct {
	name     string
	wait     string
	attempts int // how many attempts the policy makes; 0 if it never gives up
	samples  int
	stats    []waitStats
	// truncated is set when more waits were asked for than the policy sleeps.
	truncated bool
}

// sampleSchedule draws samples schedules of the waits after attempts 1 to
// upTo of np (upTo 0: every wait it sleeps, or neverWaits if it never gives
// up). Each schedule draws its waits in order, passing the previous draw as
// State.PrevWait, as Do does.
func sampleSchedule(np namedPolicy, upTo, samples int) schedule {
	w := np.policy.Wait()
	sc := schedule{name: np.name, wait: w.String(), samples: samples}
	waits := upTo
	if n, ok := attemptsOf(np.policy.Stop()); ok {
		sc.attempts = n
		if waits == 0 || waits > n-1 {
			sc.truncated = waits > n-1
			waits = n - 1
		}
	} else if waits == 0 {
		waits = neverWaits
	}
	draws := make([][]time.Duration, waits)
	for i := range draws {
		draws[i] = make([]time.Duration, samples)
	}
	for k := range samples {
		var prev time.Duration
		for i := range waits {
			d := w.Duration(retries.State{Attempt: i + 1, PrevWait: prev})
			draws[i][k] = d
			prev = d
		}
	}
	for i, ds := range draws {
		slices.Sort(ds)
		lo, hi := w.Bounds(retries.State{Attempt: i + 1})
		sc.stats = append(sc.stats, waitStats{
			n: i + 1, lo: lo, hi: hi,
			min: ds[0], p50: percentile(ds, 0.50), p95: percentile(ds, 0.95), max: ds[len(ds)-1],
		})
	}
	return sc
}

// percentile returns the nearest-rank p-quantile of the sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// scheduleFlags are the schedule command's flags.
type scheduleFlags struct {
	upTo, samples int
	svgFile       string
}

// addScheduleFlags defines the schedule command's flags on fs, each with
// its default and bounds, storing into f.
func addScheduleFlags(fs *flag.FlagSet, f *scheduleFlags) {
	intVar(fs, &f.upTo, "attempts", 0, 0, maxAttempts, "chart the waits after attempts 1 to `N`; 0: every wait the policy sleeps")
	intVar(fs, &f.samples, "samples", defaultSamples, 1, maxSamples, "`K` sampled schedules")
	fs.StringVar(&f.svgFile, "svg", "", "also write an SVG chart to `FILE`")
}

// runSchedule is the schedule command.
func runSchedule(args []string, stdout io.Writer) error {
	fs := newFlagSet("schedule")
	var f scheduleFlags
	addScheduleFlags(fs, &f)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageErrorf("schedule: missing POLICY")
	case len(pos) > 1:
		return usageErrorf("schedule: unexpected argument %q", pos[1])
	}
	nps, err := lookupPolicies(pos[0], true)
	if err != nil {
		return err
	}
	scheds := make([]schedule, len(nps))
	for i, np := range nps {
		scheds[i] = sampleSchedule(np, f.upTo, f.samples)
	}
	bw := bufio.NewWriter(stdout)
	for i, sc := range scheds {
		if i > 0 {
			fmt.Fprintln(bw)
		}
		writeScheduleText(bw, sc)
	}
	if f.svgFile != "" {
		if err := writeSVGFile(f.svgFile, scheds); err != nil {
			bw.Flush()
			return err
		}
		fmt.Fprintf(bw, "\nwrote %s\n", f.svgFile)
	}
	return bw.Flush()
}

func writeSVGFile(name string, scheds []schedule) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = writeSVG(bw, scheds)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeScheduleText prints one policy's sampled waits with a bar per wait:
// '#' up to the median, '-' on to the maximum.
func writeScheduleText(out io.Writer, sc schedule) {
	fmt.Fprintf(out, "%s: %s\n", sc.name, sc.wait)
	gives := "never gives up"
	if sc.attempts > 0 {
		gives = fmt.Sprintf("gives up after attempt %d", sc.attempts)
	}
	fmt.Fprintf(out, "%s; %d sampled schedules; seconds\n", gives, sc.samples)
	if len(sc.stats) == 0 {
		fmt.Fprintln(out, "no waits: the policy makes a single attempt")
		return
	}
	var top time.Duration
	for _, s := range sc.stats {
		top = max(top, s.max)
	}
	scale := niceCeil(top.Seconds())
	label := trimSecs(scale) + " s"
	axis := "0" + strings.Repeat(" ", max(1, barWidth-len(label))) + label
	fmt.Fprintf(out, "%13s  %7s  %7s  %7s  %7s   %s\n", "AFTER ATTEMPT", "MIN", "P50", "P95", "MAX", axis)
	for _, s := range sc.stats {
		fmt.Fprintf(out, "%13d  %7s  %7s  %7s  %7s  |%s|\n", s.n, num(s.min), num(s.p50), num(s.p95), num(s.max), bar(s, scale))
	}
	if sc.truncated {
		fmt.Fprintf(out, "no wait follows attempt %d: the policy gives up there\n", sc.attempts)
	}
	fmt.Fprintln(out, "bars: # up to the median (p50), - on to the maximum")
}

// bar draws s on a barWidth scale from 0 to scale seconds.
func bar(s waitStats, scale float64) string {
	cells := func(d time.Duration) int {
		if scale <= 0 {
			return 0
		}
		return min(barWidth, int(math.Round(d.Seconds()/scale*barWidth)))
	}
	mid, top := cells(s.p50), cells(s.max)
	if !s.random() {
		mid = top
	}
	return strings.Repeat("#", mid) + strings.Repeat("-", top-mid) + strings.Repeat(" ", barWidth-top)
}

// niceCeil rounds v up to a round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6
// or 8 times a power of ten), or returns 1 for v <= 0.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	k := math.Floor(math.Log10(v))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		// Dividing by a power of ten keeps 0.3 from becoming 0.30000000000000004.
		c := m * math.Pow(10, k)
		if k < 0 {
			c = m / math.Pow(10, -k)
		}
		if c >= v*(1-1e-9) {
			return c
		}
	}
	return math.Pow(10, k+1)
}

// trimSecs formats a number of seconds without trailing zeros.
func trimSecs(v float64) string {
	return num(time.Duration(v * float64(time.Second)))
}
