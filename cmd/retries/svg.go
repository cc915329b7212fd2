package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Colours of the series, one per policy in the order of allPolicies.
var seriesColours = []string{"#1f77b4", "#e6550d", "#2ca02c", "#d62728", "#756bb1", "#8c564b", "#c51b8a"}

// Panel geometry, in SVG user units (pixels).
const (
	titleHeight = 58
	marginLeft  = 60
	marginRight = 22
	marginTop   = 48
	marginBot   = 46
	gap         = 12
)

// writeSVG draws the sampled schedules as an SVG chart: one panel per
// policy, all on the same axes (the wait after attempt n, in seconds), a
// band from the minimum to the maximum with the median as a line for a
// random wait, and a line for a deterministic one. Each panel is a <g
// class="series"> whose id is "series-" and the policy's lower-case name.
func writeSVG(w io.Writer, scheds []schedule) error {
	cols, panelW, panelH := 2, 480, 250
	if len(scheds) == 1 {
		cols, panelW, panelH = 1, 720, 380
	}
	cells := len(scheds) + 1 // a cell for the legend
	if len(scheds) == 1 {
		cells = 1
	}
	rows := (cells + cols - 1) / cols
	width := cols*panelW + (cols+1)*gap
	height := titleHeight + rows*(panelH+gap)
	legendStrip := len(scheds) == 1
	if legendStrip {
		height += 40
	}

	// Shared axes.
	xmax := 2
	var top time.Duration
	samples := 0
	for _, sc := range scheds {
		xmax = max(xmax, len(sc.stats))
		if sc.attempts > 0 {
			xmax = max(xmax, sc.attempts+1) // room for the "gives up" label
		}
		for _, s := range sc.stats {
			top = max(top, s.hi, s.max)
		}
		samples = max(samples, sc.samples)
	}
	ymax := niceCeil(top.Seconds())

	p := &svgWriter{w: w}
	p.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	title := "Wait schedules of the retry policies"
	if len(scheds) == 1 {
		title = "Wait schedule of " + scheds[0].name
	}
	p.f("<title>%s</title>\n", esc(title))
	p.f(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	p.f(`<text x="%d" y="26" font-size="19" font-weight="bold" fill="#222">%s</text>`+"\n", gap+4, esc(title))
	of := "each policy"
	if len(scheds) == 1 {
		of = "the policy"
	}
	p.f(`<text x="%d" y="46" font-size="12.5" fill="#555">The wait after attempt n, in seconds, over %d sampled schedules of %s.</text>`+"\n", gap+4, samples, of)

	for i, sc := range scheds {
		x := gap + (i%cols)*(panelW+gap)
		y := titleHeight + (i/cols)*(panelH+gap)
		colour := seriesColours[policyIndex(sc.name)%len(seriesColours)]
		pl := panel{w: panelW, h: panelH, xmax: xmax, ymax: ymax}
		p.f(`<g id="series-%s" class="series" data-policy="%s" transform="translate(%d,%d)">`+"\n", strings.ToLower(sc.name), esc(sc.name), x, y)
		pl.draw(p, sc, colour)
		p.f("</g>\n")
	}
	if legendStrip {
		drawLegend(p, gap, height-40, true)
	} else {
		i := len(scheds) // the cell after the last panel
		drawLegend(p, gap+(i%cols)*(panelW+gap), titleHeight+(i/cols)*(panelH+gap), false)
	}
	p.f("</svg>\n")
	return p.err
}

// policyIndex returns the position of the policy called name in
// allPolicies, for its colour.
func policyIndex(name string) int {
	for i, np := range allPolicies() {
		if np.name == name {
			return i
		}
	}
	return 0
}

// panel is one policy's chart, in coordinates local to its <g>.
type panel struct {
	w, h int
	xmax int     // the x axis runs over attempts 1 to xmax
	ymax float64 // the y axis runs from 0 to ymax seconds
}

func (pl panel) left() float64   { return marginLeft }
func (pl panel) right() float64  { return float64(pl.w - marginRight) }
func (pl panel) top() float64    { return marginTop }
func (pl panel) bottom() float64 { return float64(pl.h - marginBot) }

// x returns the horizontal position of attempt n.
func (pl panel) x(n float64) float64 {
	return pl.left() + (n-0.5)/float64(pl.xmax)*(pl.right()-pl.left())
}

// y returns the vertical position of d.
func (pl panel) y(d time.Duration) float64 {
	return pl.bottom() - min(d.Seconds()/pl.ymax, 1.02)*(pl.bottom()-pl.top())
}

func (pl panel) draw(p *svgWriter, sc schedule, colour string) {
	p.f(`<rect x="0.5" y="0.5" width="%d" height="%d" rx="6" fill="#fcfcfc" stroke="#dddddd"/>`+"\n", pl.w-1, pl.h-1)
	p.f(`<text x="%g" y="21" font-size="15" font-weight="bold" fill="%s">%s</text>`+"\n", pl.left(), colour, esc(sc.name))
	p.f(`<text x="%g" y="37" font-size="10.5" fill="#555">%s</text>`+"\n", pl.left(), esc(sc.wait))

	// Grid, ticks and axis labels.
	step := tickStep(pl.ymax)
	for i := 0; float64(i)*step <= pl.ymax*(1+1e-9); i++ {
		v := float64(i) * step
		yy := pl.y(time.Duration(v * float64(time.Second)))
		p.f(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e4e4e4"/>`+"\n", pl.left(), yy, pl.right(), yy)
		p.f(`<text x="%g" y="%.1f" font-size="10.5" fill="#444" text-anchor="end">%s</text>`+"\n", pl.left()-6, yy+3.5, trimFloat(v))
	}
	for n := 1; n <= pl.xmax; n++ {
		xx := pl.x(float64(n))
		p.f(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#888"/>`+"\n", xx, pl.bottom(), xx, pl.bottom()+4)
		p.f(`<text x="%.1f" y="%g" font-size="10.5" fill="#444" text-anchor="middle">%d</text>`+"\n", xx, pl.bottom()+16, n)
	}
	p.f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#888"/>`+"\n", pl.left(), pl.top(), pl.left(), pl.bottom())
	p.f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#888"/>`+"\n", pl.left(), pl.bottom(), pl.right(), pl.bottom())
	p.f(`<text x="%.1f" y="%d" font-size="11" fill="#333" text-anchor="middle">attempt n (the wait follows it)</text>`+"\n", (pl.left()+pl.right())/2, pl.h-10)
	cy := (pl.top() + pl.bottom()) / 2
	p.f(`<text x="16" y="%.1f" font-size="11" fill="#333" text-anchor="middle" transform="rotate(-90 16 %.1f)">wait (s)</text>`+"\n", cy, cy)

	// Where the policy gives up.
	if sc.attempts > 0 && sc.attempts <= pl.xmax {
		xx := pl.x(float64(sc.attempts))
		p.f(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#999" stroke-dasharray="4 3"/>`+"\n", xx, pl.top(), xx, pl.bottom())
		label := fmt.Sprintf("gives up after attempt %d", sc.attempts)
		if xx+8+float64(len(label))*5.6 < pl.right() {
			p.f(`<text x="%.1f" y="%g" font-size="10.5" fill="#666">%s</text>`+"\n", xx+5, pl.top()+11, label)
		} else {
			p.f(`<text x="%.1f" y="%g" font-size="10.5" fill="#666" text-anchor="end">%s</text>`+"\n", xx-5, pl.top()+11, label)
		}
	} else if sc.attempts == 0 {
		p.f(`<text x="%g" y="%g" font-size="10.5" fill="#666" text-anchor="end">never gives up</text>`+"\n", pl.right()-4, pl.top()+11)
	}
	if len(sc.stats) == 0 {
		p.f(`<text x="%.1f" y="%.1f" font-size="12" fill="#666" text-anchor="middle">no waits</text>`+"\n", (pl.left()+pl.right())/2, cy)
		return
	}

	random := false
	for _, s := range sc.stats {
		random = random || s.random()
	}
	if random {
		var band []string
		for _, s := range sc.stats {
			band = append(band, pt(pl.x(float64(s.n)), pl.y(s.max)))
		}
		for i := len(sc.stats) - 1; i >= 0; i-- {
			s := sc.stats[i]
			band = append(band, pt(pl.x(float64(s.n)), pl.y(s.min)))
		}
		p.f(`<polygon class="band" points="%s" fill="%s" fill-opacity="0.22" stroke="none"/>`+"\n", strings.Join(band, " "), colour)
		for _, s := range sc.stats {
			if len(sc.stats) > 1 && s.n > 1 && s.n < len(sc.stats) {
				continue // the band shows it; a range line marks the ends
			}
			xx := pl.x(float64(s.n))
			p.f(`<line class="range" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-opacity="0.55" stroke-width="1.5"/>`+"\n", xx, pl.y(s.min), xx, pl.y(s.max), colour)
		}
		p.f(`<polyline class="p95" points="%s" fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="5 3"/>`+"\n", line(pl, sc.stats, func(s waitStats) time.Duration { return s.p95 }), colour)
	}
	p.f(`<polyline class="p50" points="%s" fill="none" stroke="%s" stroke-width="2.2"/>`+"\n", line(pl, sc.stats, func(s waitStats) time.Duration { return s.p50 }), colour)
	for _, s := range sc.stats {
		p.f(`<circle cx="%.1f" cy="%.1f" r="3.2" fill="%s"/>`+"\n", pl.x(float64(s.n)), pl.y(s.p50), colour)
	}
}

// drawLegend explains the marks at x, y: in one line under a single panel
// (strip), or in a panel-sized cell.
func drawLegend(p *svgWriter, x, y int, strip bool) {
	p.f(`<g id="legend" transform="translate(%d,%d)" font-size="12" fill="#333">`+"\n", x, y)
	c := "#666666"
	if strip {
		p.f(`<rect x="4" y="8" width="26" height="16" fill="%s" fill-opacity="0.22"/><line x1="4" y1="16" x2="30" y2="16" stroke="%s" stroke-width="2.2"/>`+"\n", c, c)
		p.f(`<text x="36" y="20">min to max, median line</text>` + "\n")
		p.f(`<line x1="210" y1="16" x2="236" y2="16" stroke="%s" stroke-width="1.2" stroke-dasharray="5 3"/><text x="242" y="20">p95</text>`+"\n", c)
		p.f(`<line x1="290" y1="16" x2="316" y2="16" stroke="%s" stroke-width="2.2"/><circle cx="303" cy="16" r="3.2" fill="%s"/><text x="322" y="20">a fixed wait, or the median</text>`+"\n", c, c)
		p.f("</g>\n")
		return
	}
	p.f(`<text x="16" y="28" font-size="14" font-weight="bold">How to read the panels</text>` + "\n")
	p.f(`<rect x="16" y="46" width="34" height="22" fill="%s" fill-opacity="0.22"/><line x1="16" y1="57" x2="50" y2="57" stroke="%s" stroke-width="2.2"/>`+"\n", c, c)
	p.f(`<text x="60" y="55">band: the least to the greatest wait;</text><text x="60" y="70">line: the median of the samples</text>` + "\n")
	p.f(`<line x1="16" y1="94" x2="50" y2="94" stroke="%s" stroke-width="1.2" stroke-dasharray="5 3"/><text x="60" y="98">dashed: the 95th percentile</text>`+"\n", c)
	p.f(`<line x1="16" y1="124" x2="50" y2="124" stroke="%s" stroke-width="2.2"/><circle cx="33" cy="124" r="3.2" fill="%s"/><text x="60" y="128">line alone: a fixed wait</text>`+"\n", c, c)
	p.f(`<line x1="33" y1="144" x2="33" y2="168" stroke="#999" stroke-dasharray="4 3"/><text x="60" y="160">the attempt after which the policy</text><text x="60" y="175">gives up: no wait follows it</text>` + "\n")
	p.f(`<text x="16" y="204" fill="#555">All panels share their axes. Generated by</text><text x="16" y="220" fill="#555" font-family="monospace">go run ./cmd/retries schedule all -svg FILE</text>` + "\n")
	p.f("</g>\n")
}

// line returns the points of a polyline through f of every wait.
func line(pl panel, stats []waitStats, f func(waitStats) time.Duration) string {
	pts := make([]string, len(stats))
	for i, s := range stats {
		pts[i] = pt(pl.x(float64(s.n)), pl.y(f(s)))
	}
	return strings.Join(pts, " ")
}

func pt(x, y float64) string { return fmt.Sprintf("%.1f,%.1f", x, y) }

// tickStep returns a round step that divides ymax into at most six parts.
func tickStep(ymax float64) float64 {
	for k := -3; k <= 6; k++ {
		for _, m := range []float64{1, 2, 2.5, 5} {
			s := m * math.Pow(10, float64(k))
			q := ymax / s
			if q <= 6+1e-9 && math.Abs(q-math.Round(q)) < 1e-6 {
				return s
			}
		}
	}
	return ymax / 4
}

func trimFloat(v float64) string {
	s := strings.TrimRight(fmt.Sprintf("%.3f", v), "0")
	return strings.TrimSuffix(s, ".")
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// svgWriter writes formatted output, keeping the first error.
type svgWriter struct {
	w   io.Writer
	err error
}

func (p *svgWriter) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
