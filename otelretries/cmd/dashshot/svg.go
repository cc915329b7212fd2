package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// line is one legend entry of a panel and its values over time.
type line struct {
	legend string
	t, v   []float64
}

// panelData is a panel of the dashboard with its lines.
type panelData struct {
	title, unit string
	row         bool
	x, y, w, h  int // Grafana's grid: 24 columns, rows of h units
	targets     []target
	lines       []line
	err         string
}

// target is one query of a panel and its legend.
type target struct{ expr, legend string }

// The grid: a column's width and a row unit's height, in pixels.
const (
	colW  = 70
	unitH = 32
)

var palette = []string{"#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0", "#508642", "#cca300"}

// writeSVG draws the panels, Grafana's dark theme in spirit, over the run's
// span of seconds, scraped every step seconds.
func writeSVG(w io.Writer, title, note string, panels []panelData, span, step float64) {
	height := 0
	for _, p := range panels {
		height = max(height, (p.y+p.h)*unitH)
	}
	width := 24 * colW
	top := 56
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="DejaVu Sans, sans-serif">`+"\n", width, height+top+8)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="#111217"/>`+"\n")
	fmt.Fprintf(w, `<text x="12" y="26" fill="#d8d9da" font-size="18">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(w, `<text x="12" y="46" fill="#8e8e8e" font-size="12">%s</text>`+"\n", html.EscapeString(note))
	for _, p := range panels {
		x, y, pw, ph := p.x*colW+4, top+p.y*unitH+4, p.w*colW-8, p.h*unitH-8
		if p.row {
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#d8d9da" font-size="15" font-weight="bold">%s</text>`+"\n", x, y+18, html.EscapeString(p.title))
			continue
		}
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="#181b1f" stroke="#2c3235"/>`+"\n", x, y, pw, ph)
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#d8d9da" font-size="12" font-weight="bold">%s</text>`+"\n", x+8, y+17, html.EscapeString(p.title))
		drawPlot(w, p, x+52, y+26, pw-60, ph-26-legendHeight(p), span, step)
	}
	fmt.Fprintln(w, `</svg>`)
}

// legendHeight is the room the panel's legend takes.
func legendHeight(p panelData) int { return 14*min(len(p.lines), 4) + 22 }

// drawPlot draws p's lines in the plot area at x, y, pw wide and ph high,
// a line broken where it has no value for more than a scrape (step
// seconds).
func drawPlot(w io.Writer, p panelData, x, y, pw, ph int, span, step float64) {
	if p.err != "" || len(p.lines) == 0 {
		msg := "No data"
		if p.err != "" {
			msg = p.err
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#8e8e8e" font-size="12" text-anchor="middle">%s</text>`+"\n", x+pw/2, y+ph/2, html.EscapeString(msg))
		return
	}
	hi := 0.0
	for _, l := range p.lines {
		for _, v := range l.v {
			hi = math.Max(hi, v)
		}
	}
	hi = niceCeil(hi)
	for i := 0; i <= 4; i++ { // the grid and the y axis
		gy := float64(y+ph) - float64(ph)*float64(i)/4
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#2c3235"/>`+"\n", x, gy, x+pw, gy)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" fill="#8e8e8e" font-size="10" text-anchor="end">%s</text>`+"\n", x-4, gy+3, formatValue(hi*float64(i)/4, p.unit))
	}
	for s := tickEvery(span); s <= span; s += tickEvery(span) { // the time axis, seconds since the start
		gx := float64(x) + float64(pw)*s/span
		fmt.Fprintf(w, `<text x="%.1f" y="%d" fill="#8e8e8e" font-size="10" text-anchor="middle">%.0fs</text>`+"\n", gx, y+ph+12, s)
	}
	for i, l := range p.lines {
		color := palette[i%len(palette)]
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j := range l.t {
			if j > 0 && l.t[j]-l.t[j-1] > 1.5*step { // no value between: a gap, as Grafana leaves it
				flush()
			}
			px := float64(x) + float64(pw)*l.t[j]/span
			py := float64(y+ph) - float64(ph)*l.v[j]/hi
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		flush()
		if i < 4 {
			ly := y + ph + 28 + 14*i
			last := l.v[len(l.v)-1]
			peak := 0.0
			for _, v := range l.v {
				peak = math.Max(peak, v)
			}
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/>`+"\n", x-44, ly-4, color)
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#c7d0d9" font-size="10">%s</text>`+"\n", x-30, ly, html.EscapeString(trim(l.legend, 44)))
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#8e8e8e" font-size="10" text-anchor="end">last %s  max %s</text>`+"\n", x+pw, ly, formatValue(last, p.unit), formatValue(peak, p.unit))
		}
	}
	if len(p.lines) > 4 {
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#8e8e8e" font-size="10">and %d more</text>`+"\n", x-30, y+ph+28+14*4, len(p.lines)-4)
	}
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// sortLines orders a panel's lines by legend.
func sortLines(ls []line) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].legend < ls[j].legend })
}

func tickEvery(span float64) float64 {
	for _, t := range []float64{1, 2, 5, 10, 20, 30, 60, 120, 300} {
		if span/t <= 8 {
			return t
		}
	}
	return 600
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

// formatValue writes v in the panel's unit, as Grafana's units do.
func formatValue(v float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case v == 0:
			return "0 s"
		case v < 1e-3:
			return fmt.Sprintf("%.0f µs", v*1e6)
		case v < 1:
			return fmt.Sprintf("%.0f ms", v*1e3)
		}
		return fmt.Sprintf("%.2g s", v)
	case "percentunit":
		return fmt.Sprintf("%.1f%%", 100*v)
	case "ops":
		return si(v) + " ops/s"
	case "reqps":
		return si(v) + " req/s"
	}
	return si(v)
}

func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gK", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
