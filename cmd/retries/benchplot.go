package main

import (
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// chart is one panel of a -plot: its place in the picture and the ranges
// of its axes, each from 0.
type chart struct {
	x, y, w, h     float64 // the plotting area
	xmax, ymax     float64
	xlabel, ylabel string
}

// niceMax returns the least of 1, 2, 2.5 or 5 times a power of ten at or
// above v, so that the axis's ticks are round.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func (c chart) px(v float64) float64 { return c.x + v/c.xmax*c.w }
func (c chart) py(v float64) float64 { return c.y + c.h - v/c.ymax*c.h }

// axes draws c's frame, ticks and labels.
func (c chart) axes(p *svgWriter) {
	p.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", c.x, c.y, c.w, c.h)
	for _, ax := range []struct {
		max      float64
		vertical bool
	}{{c.xmax, false}, {c.ymax, true}} {
		step := tickStep(ax.max)
		for v := 0.0; v <= ax.max*(1+1e-9); v += step {
			if ax.vertical {
				y := c.py(v)
				p.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`+"\n",
					c.x, y, c.x+c.w, y, c.x-5, y+4, trimFloat(v))
			} else {
				x := c.px(v)
				p.f(`<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x, c.y+c.h+15, trimFloat(v))
			}
		}
	}
	p.f(`<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text>`+"\n", c.x+c.w/2, c.y+c.h+32, esc(c.xlabel))
	p.f(`<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		c.x-42, c.y+c.h/2, c.x-42, c.y+c.h/2, esc(c.ylabel))
}

// series draws the points (x, y) of c as a line named id, in colour, with
// its legend at slot.
func (c chart) series(p *svgWriter, id, colour string, xs, ys []float64, slot int) {
	pts := make([]string, len(xs))
	for i := range xs {
		pts[i] = pt(c.px(xs[i]), c.py(min(ys[i], c.ymax)))
	}
	p.f(`<g class="series" id="series-%s"><polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, id, colour, strings.Join(pts, " "))
	lx := c.x + 10 + float64(slot)*90
	p.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f" font-size="11">%s</text></g>`+"\n",
		lx, c.y-8, lx+18, c.y-8, colour, lx+22, c.y-4, esc(id))
}

// plotBench writes the -plot picture of a bench: for one rate, its
// latency percentiles (from the due time) and its answers, second by
// second (the timeline); for a step run, the latency–throughput curve,
// each step's p50, p99 and p99.9 against the queries a second it
// answered ok, with the knee marked.
func plotBench(w io.Writer, reports []*benchReport, knee *benchReport, slo time.Duration) error {
	p := &svgWriter{w: w}
	const width, height = 820.0, 560.0
	p.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	p.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	if len(reports) == 1 {
		plotRun(p, reports[0])
	} else {
		plotSteps(p, reports, knee, slo)
	}
	p.f("</svg>\n")
	return p.err
}

// plotRun draws one rate's timeline: latency above, answers below.
func plotRun(p *svgWriter, r *benchReport) {
	p.f(`<text x="20" y="26" font-size="15">retries bench: %.0f queries/s offered (%s arrivals), %d queries, %d ok, %d degraded, %d failed</text>`+"\n",
		r.Offered, esc(r.arrivals), r.Queries, r.OK, r.Degraded, r.Failed)
	n := len(r.timeline)
	xs := make([]float64, n)
	p50, p99, p999, ok, bad := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	top, most := 0.0, 0.0
	for i, s := range r.timeline {
		lat := slices.Clone(s.latency)
		xs[i] = float64(i) + 0.5
		p50[i], p99[i], p999[i] = ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)), ms(quantile(lat, 0.999))
		ok[i], bad[i] = float64(s.ok), float64(s.degraded+s.failed)
		top, most = max(top, p999[i]), max(most, float64(s.sent))
	}
	span := niceMax(float64(max(n, 1)))
	lat := chart{x: 80, y: 60, w: 700, h: 230, xmax: span, ymax: niceMax(top), xlabel: "seconds (by due time)", ylabel: "latency from due, ms"}
	lat.axes(p)
	lat.series(p, "p50", "#2ca02c", xs, p50, 0)
	lat.series(p, "p99", "#e6550d", xs, p99, 1)
	lat.series(p, "p999", "#d62728", xs, p999, 2)
	tp := chart{x: 80, y: 350, w: 700, h: 150, xmax: span, ymax: niceMax(most), xlabel: "seconds (by due time)", ylabel: "queries / s"}
	tp.axes(p)
	tp.series(p, "ok", "#1f77b4", xs, ok, 0)
	tp.series(p, "degraded+failed", "#7f7f7f", xs, bad, 1)
}

// plotSteps draws a step run's latency–throughput curve: past the
// capacity the ok answers a second stop growing while the rate offered
// does, and the curve turns back or up; each step's point is labelled with
// the rate offered.
func plotSteps(p *svgWriter, reports []*benchReport, knee *benchReport, slo time.Duration) {
	p.f(`<text x="20" y="26" font-size="15">retries bench: latency against throughput, %d steps of %.0f to %.0f queries/s offered; SLO p99 %v</text>`+"\n",
		len(reports), reports[0].Offered, reports[len(reports)-1].Offered, slo)
	n := len(reports)
	xs, p50, p99, p999 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	right, top := 0.0, ms(slo)
	for i, r := range reports {
		xs[i] = float64(r.OK) / max(r.Duration.Seconds(), 1e-9)
		p50[i], p99[i], p999[i] = ms(r.p(0.5)), ms(r.p(0.99)), ms(r.p(0.999))
		right, top = max(right, xs[i]), max(top, p999[i])
	}
	c := chart{x: 80, y: 60, w: 700, h: 430, xmax: niceMax(right), ymax: niceMax(1.1 * top), xlabel: "ok answers / s", ylabel: "latency from due, ms"}
	c.axes(p)
	y := c.py(ms(slo))
	p.f(`<line id="slo" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/><text x="%.1f" y="%.1f" font-size="11" fill="#666">SLO p99 %v</text>`+"\n",
		c.x, y, c.x+c.w, y, c.x+c.w-90, y-4, slo)
	c.series(p, "p50", "#2ca02c", xs, p50, 0)
	c.series(p, "p99", "#e6550d", xs, p99, 1)
	c.series(p, "p999", "#d62728", xs, p999, 2)
	for i, r := range reports { // each step's point on the p99 curve, with the rate offered
		x, y := c.px(xs[i]), c.py(min(p99[i], c.ymax))
		p.f(`<circle class="step" cx="%.1f" cy="%.1f" r="3" fill="#e6550d"/><text x="%.1f" y="%.1f" font-size="10" fill="#555">%.0f</text>`+"\n",
			x, y, x+4, y+14, r.Offered)
	}
	if knee != nil {
		i := slices.Index(reports, knee)
		x, y := c.px(xs[i]), c.py(min(p99[i], c.ymax))
		tx, anchor := x+10, "start"
		if x > c.x+0.7*c.w { // the label to the left of the mark, within the picture
			tx, anchor = x-10, "end"
		}
		p.f(`<g id="knee"><circle cx="%.1f" cy="%.1f" r="7" fill="none" stroke="black" stroke-width="2"/><text x="%.1f" y="%.1f" font-size="12" text-anchor="%s">knee: %.0f queries/s offered</text></g>`+"\n",
			x, y, tx, y-10, anchor, knee.Offered)
	}
}
