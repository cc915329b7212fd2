package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// assertion is one threshold of -assert: a figure of the report, compared
// with a value.
type assertion struct {
	text   string // as given
	metric string // p50, p90, p95, p99, p999, max, failed, degraded, rate
	op     string // <, <=, >, >=
	value  float64
}

// latencyQuantiles are the latency figures -assert reads, from the due
// time, over every query (the report's latency_ms).
var latencyQuantiles = map[string]float64{"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999, "max": 1}

// parseAsserts reads -assert: EXPR[,EXPR…], each METRIC OP VALUE, such as
// p99<=20ms, failed<1% or rate>=290.
func parseAsserts(s string) ([]assertion, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []assertion
	for _, text := range strings.Split(s, ",") {
		a, err := parseAssert(strings.TrimSpace(text))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAssert(text string) (assertion, error) {
	a := assertion{text: text}
	i := strings.IndexAny(text, "<>")
	if i <= 0 {
		return a, fmt.Errorf("%q: want METRIC<VALUE, <=, > or >=, such as p99<=20ms", text)
	}
	a.metric, a.op = strings.TrimSpace(text[:i]), text[i:i+1]
	rest := text[i+1:]
	if strings.HasPrefix(rest, "=") {
		a.op, rest = a.op+"=", rest[1:]
	}
	rest = strings.TrimSpace(rest)
	var err error
	switch _, isLatency := latencyQuantiles[a.metric]; {
	case isLatency:
		var d time.Duration
		d, err = time.ParseDuration(strings.Replace(rest, "µ", "u", 1))
		a.value = float64(d)
	case a.metric == "failed" || a.metric == "degraded":
		if p, ok := strings.CutSuffix(rest, "%"); ok {
			a.value, err = strconv.ParseFloat(p, 64)
			a.value /= 100
		} else {
			a.value, err = strconv.ParseFloat(rest, 64)
		}
		if err == nil && (a.value < 0 || a.value > 1) {
			err = errors.New("a share from 0 to 1, or 0% to 100%")
		}
	case a.metric == "rate":
		a.value, err = strconv.ParseFloat(rest, 64)
	default:
		return a, fmt.Errorf("%q: no figure %q: want p50, p90, p95, p99, p999, max, failed, degraded or rate", text, a.metric)
	}
	if err != nil {
		return a, fmt.Errorf("%q: %q is no value for %s (latencies with a unit, 20ms; shares 1%% or 0.01; rate in queries/s): %v", text, rest, a.metric, err)
	}
	return a, nil
}

// figure returns the report's figure for a, and how to write it.
func (a assertion) figure(r *benchReport) (float64, string) {
	if q, ok := latencyQuantiles[a.metric]; ok {
		d := r.p(q)
		return float64(d), fmt.Sprintf("%.2f ms", ms(d))
	}
	share := func(n int64) (float64, string) {
		v := float64(n) / float64(max(r.Queries, 1))
		return v, fmt.Sprintf("%.2f %% (%d of %d)", 100*v, n, r.Queries)
	}
	switch a.metric {
	case "failed":
		return share(r.Failed)
	case "degraded":
		return share(r.Degraded)
	}
	return r.Achieved, fmt.Sprintf("%.1f queries/s", r.Achieved)
}

// holds reports whether a holds of r, with r's figure written out.
func (a assertion) holds(r *benchReport) (bool, string) {
	v, s := a.figure(r)
	switch a.op {
	case "<":
		return v < a.value, s
	case "<=":
		return v <= a.value, s
	case ">":
		return v > a.value, s
	}
	return v >= a.value, s
}

// checkAsserts checks every assertion against every report (each step of a
// step run), says each breach on w, and returns errSilent if any (exit 1).
func checkAsserts(asserts []assertion, reports []*benchReport, w io.Writer) error {
	breached := 0
	for _, r := range reports {
		for _, a := range asserts {
			if ok, got := a.holds(r); !ok {
				breached++
				step := ""
				if len(reports) > 1 {
					step = fmt.Sprintf(" at %.0f queries/s", r.Offered)
				}
				fmt.Fprintf(w, "retries bench: -assert %s breached%s: %s is %s\n", a.text, step, a.metric, got)
			}
		}
	}
	if breached > 0 {
		return errSilent
	}
	return nil
}
