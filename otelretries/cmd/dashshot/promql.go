package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The queries of the dashboard are evaluated here by a small subset of
// PromQL, enough for every query the dashboard has and no more: a
// selector with = and =~ matchers and an optional range, rate and
// increase of a range, histogram_quantile, sum by (…), a number, and /
// between two vectors with the same labels. Anything else is an error,
// so that a panel never shows what Prometheus would not.

// labels are a series' labels; "__name__" is its metric's name.
type labels map[string]string

func (l labels) key() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strconv.Quote(l[k]) + ",")
	}
	return b.String()
}

// sample is one value of a vector.
type sample struct {
	l labels
	v float64
}

// series is the values of one series over time (seconds since the start).
type series struct {
	l    labels
	t, v []float64
}

// tsdb holds every series scraped.
type tsdb struct{ series map[string]*series }

func (db *tsdb) add(l labels, t, v float64) {
	k := l.key()
	s := db.series[k]
	if s == nil {
		s = &series{l: l}
		db.series[k] = s
	}
	s.t, s.v = append(s.t, t), append(s.v, v)
}

// node is an expression; eval returns its vector at t, a rate's range
// being window seconds.
type node interface {
	eval(db *tsdb, t, window float64) ([]sample, error)
}

type matcher struct {
	name, value string
	re          *regexp.Regexp
}

type selector struct {
	name     string
	matchers []matcher
	ranged   bool
}

type call struct {
	fn   string
	args []node
}

type sumBy struct {
	by []string
	e  node
}

type number float64

type divide struct{ l, r node }

func (s selector) match(l labels) bool {
	if l["__name__"] != s.name {
		return false
	}
	for _, m := range s.matchers {
		if m.re != nil && !m.re.MatchString(l[m.name]) || m.re == nil && l[m.name] != m.value {
			return false
		}
	}
	return true
}

func (s selector) eval(db *tsdb, t, _ float64) ([]sample, error) {
	if s.ranged {
		return nil, fmt.Errorf("a range selector %s outside rate or increase", s.name)
	}
	var out []sample
	for _, ser := range db.series {
		if !s.match(ser.l) {
			continue
		}
		for i := len(ser.t) - 1; i >= 0; i-- {
			if ser.t[i] <= t {
				if t-ser.t[i] <= 5 { // a series not scraped for 5 s is stale
					out = append(out, sample{withoutName(ser.l), ser.v[i]})
				}
				break
			}
		}
	}
	return out, nil
}

func withoutName(l labels) labels {
	out := labels{}
	for k, v := range l {
		if k != "__name__" {
			out[k] = v
		}
	}
	return out
}

func (c call) eval(db *tsdb, t, window float64) ([]sample, error) {
	switch c.fn {
	case "rate", "increase":
		sel, ok := c.args[0].(selector)
		if len(c.args) != 1 || !ok || !sel.ranged {
			return nil, fmt.Errorf("%s wants one range selector", c.fn)
		}
		var out []sample
		for _, ser := range db.series {
			if !sel.match(ser.l) {
				continue
			}
			first, last := -1, -1
			for i, st := range ser.t {
				if st > t-window && st <= t {
					if first < 0 {
						first = i
					}
					last = i
				}
			}
			if first < 0 || last == first {
				continue
			}
			d := ser.v[last] - ser.v[first]
			if d < 0 { // a reset
				d = ser.v[last]
			}
			if c.fn == "rate" {
				d /= ser.t[last] - ser.t[first]
			}
			out = append(out, sample{withoutName(ser.l), d})
		}
		return out, nil
	case "histogram_quantile":
		q, ok := c.args[0].(number)
		if len(c.args) != 2 || !ok {
			return nil, fmt.Errorf("histogram_quantile wants a number and a vector")
		}
		v, err := c.args[1].eval(db, t, window)
		if err != nil {
			return nil, err
		}
		return quantiles(float64(q), v), nil
	}
	return nil, fmt.Errorf("no function %s here", c.fn)
}

// quantiles is histogram_quantile over v, grouped by its labels but le,
// interpolating linearly within a bucket as Prometheus does.
func quantiles(q float64, v []sample) []sample {
	type bucket struct{ le, n float64 }
	groups := map[string][]bucket{}
	ls := map[string]labels{}
	for _, s := range v {
		le, err := strconv.ParseFloat(s.l["le"], 64)
		if err != nil {
			continue
		}
		rest := labels{}
		for k, val := range s.l {
			if k != "le" {
				rest[k] = val
			}
		}
		k := rest.key()
		groups[k], ls[k] = append(groups[k], bucket{le, s.v}), rest
	}
	var out []sample
	for k, bs := range groups {
		sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
		total := bs[len(bs)-1].n
		if total <= 0 || !math.IsInf(bs[len(bs)-1].le, 1) {
			continue
		}
		rank := q * total
		prevLe, prevN := 0.0, 0.0
		for _, b := range bs {
			if b.n >= rank {
				val := b.le
				if math.IsInf(b.le, 1) {
					val = prevLe
				} else if b.n > prevN {
					val = prevLe + (b.le-prevLe)*(rank-prevN)/(b.n-prevN)
				}
				out = append(out, sample{ls[k], val})
				break
			}
			prevLe, prevN = b.le, b.n
		}
	}
	return out
}

func (s sumBy) eval(db *tsdb, t, window float64) ([]sample, error) {
	v, err := s.e.eval(db, t, window)
	if err != nil {
		return nil, err
	}
	sums := map[string]*sample{}
	var order []string
	for _, x := range v {
		l := labels{}
		for _, k := range s.by {
			if val, ok := x.l[k]; ok {
				l[k] = val
			}
		}
		k := l.key()
		if sums[k] == nil {
			sums[k] = &sample{l: l}
			order = append(order, k)
		}
		sums[k].v += x.v
	}
	out := make([]sample, 0, len(order))
	for _, k := range order {
		out = append(out, *sums[k])
	}
	return out, nil
}

func (n number) eval(*tsdb, float64, float64) ([]sample, error) {
	return nil, fmt.Errorf("a number alone")
}

func (d divide) eval(db *tsdb, t, window float64) ([]sample, error) {
	l, err := d.l.eval(db, t, window)
	if err != nil {
		return nil, err
	}
	r, err := d.r.eval(db, t, window)
	if err != nil {
		return nil, err
	}
	by := map[string]float64{}
	for _, s := range r {
		by[s.l.key()] = s.v
	}
	var out []sample
	for _, s := range l {
		if den, ok := by[s.l.key()]; ok && den != 0 {
			out = append(out, sample{s.l, s.v / den})
		}
	}
	return out, nil
}

// parse parses a query of the subset.
func parse(q string) (node, error) {
	p := &parser{toks: tokenize(q)}
	n, err := p.expr()
	if err == nil && p.i < len(p.toks) {
		err = fmt.Errorf("unexpected %q", p.toks[p.i])
	}
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	return n, nil
}

type parser struct {
	toks []string
	i    int
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) next() string { t := p.peek(); p.i++; return t }

func (p *parser) want(t string) error {
	if got := p.next(); got != t {
		return fmt.Errorf("want %q, got %q", t, got)
	}
	return nil
}

func (p *parser) expr() (node, error) {
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	if p.peek() == "/" {
		p.next()
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		return divide{l, r}, nil
	}
	return l, nil
}

func (p *parser) term() (node, error) {
	t := p.next()
	switch {
	case t == "sum":
		return p.sumBy()
	case t == "rate" || t == "increase" || t == "histogram_quantile":
		return p.call(t)
	case t != "" && (unicode.IsDigit(rune(t[0])) || t[0] == '.'):
		f, err := strconv.ParseFloat(t, 64)
		return number(f), err
	case t != "" && (unicode.IsLetter(rune(t[0])) || t[0] == '_'):
		return p.selector(t)
	case t == "(":
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return e, p.want(")")
	}
	return nil, fmt.Errorf("unexpected %q", t)
}

// sumBy reads "by (LABELS) (EXPR)" after sum.
func (p *parser) sumBy() (node, error) {
	if err := p.want("by"); err != nil {
		return nil, err
	}
	if err := p.want("("); err != nil {
		return nil, err
	}
	var by []string
	for p.peek() != ")" && p.peek() != "" {
		if tok := p.next(); tok != "," {
			by = append(by, tok)
		}
	}
	if err := p.want(")"); err != nil {
		return nil, err
	}
	if err := p.want("("); err != nil {
		return nil, err
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	return sumBy{by, e}, p.want(")")
}

// call reads the arguments of the function fn, in parentheses.
func (p *parser) call(fn string) (node, error) {
	if err := p.want("("); err != nil {
		return nil, err
	}
	var args []node
	for {
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.peek() != "," {
			break
		}
		p.next()
	}
	return call{fn, args}, p.want(")")
}

// selector reads the series selector of metric name: its matchers in
// braces, and a range in brackets.
func (p *parser) selector(name string) (node, error) {
	s := selector{name: name}
	if p.peek() == "{" {
		p.next()
		for p.peek() != "}" && p.peek() != "" {
			m, err := p.matcher()
			if err != nil {
				return nil, err
			}
			s.matchers = append(s.matchers, m)
			if p.peek() == "," {
				p.next()
			}
		}
		if err := p.want("}"); err != nil {
			return nil, err
		}
	}
	if p.peek() == "[" {
		p.next()
		for p.peek() != "]" && p.peek() != "" {
			p.next()
		}
		if err := p.want("]"); err != nil {
			return nil, err
		}
		s.ranged = true
	}
	return s, nil
}

// matcher reads one label matcher: NAME="VALUE" or NAME=~"RE".
func (p *parser) matcher() (matcher, error) {
	name, op, val := p.next(), p.next(), p.next()
	if !labelName.MatchString(name) {
		return matcher{}, fmt.Errorf("label %q", name)
	}
	v, err := strconv.Unquote(val)
	if err != nil {
		return matcher{}, fmt.Errorf("matcher %s%s%s: %w", name, op, val, err)
	}
	m := matcher{name: name, value: v}
	switch op {
	case "=~":
		if m.re, err = regexp.Compile("^(?:" + v + ")$"); err != nil {
			return matcher{}, err
		}
	case "=":
	default:
		return matcher{}, fmt.Errorf("matcher operator %q", op)
	}
	return m, nil
}

var labelName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// tokenize splits a query into names, numbers, strings and punctuation.
func tokenize(q string) []string {
	var out []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t':
			i++
		case c == '"':
			j := i + 1
			for j < len(q) && q[j] != '"' {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, q[i:min(j+1, len(q))])
			i = j + 1
		case c == '=' && i+1 < len(q) && q[i+1] == '~':
			out = append(out, "=~")
			i += 2
		case strings.ContainsRune("(){}[],/=", rune(c)):
			out = append(out, string(c))
			i++
		default:
			j := i
			for j < len(q) && !strings.ContainsRune(" \n\t\"(){}[],/=", rune(q[j])) {
				j++
			}
			out = append(out, q[i:j])
			i = j
		}
	}
	return out
}
