package main

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestDashboardQueriesParse: every query of the dashboard is in the subset
// this command evaluates; a query outside it would draw an error instead
// of its lines.
func TestDashboardQueriesParse(t *testing.T) {
	b, err := os.ReadFile("../../dashboard/retries.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct{ Targets []struct{ Expr string } }
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if _, err := parse(tg.Expr); err != nil {
				t.Error(err)
			}
			n++
		}
	}
	if n < 30 {
		t.Errorf("%d queries parsed, want the dashboard's (over 30)", n)
	}
}

// TestQueries evaluates each form the dashboard uses on series whose
// answers are known.
func TestQueries(t *testing.T) {
	db := &tsdb{series: map[string]*series{}}
	for i := 0; i <= 10; i++ {
		ts := float64(i)
		// 2 calls a second of policy A, one of them failing; 1 a second of B.
		db.add(labels{"__name__": "calls_total", "policy": "A", "outcome": "success"}, ts, ts)
		db.add(labels{"__name__": "calls_total", "policy": "A", "outcome": "gave_up"}, ts, ts)
		db.add(labels{"__name__": "calls_total", "policy": "B", "outcome": "success"}, ts, ts)
		// A histogram: each second, 10 observations of 0.1 s or less and
		// 10 between 0.1 and 1 s.
		db.add(labels{"__name__": "d_bucket", "policy": "A", "le": "0.1"}, ts, 10*ts)
		db.add(labels{"__name__": "d_bucket", "policy": "A", "le": "1"}, ts, 20*ts)
		db.add(labels{"__name__": "d_bucket", "policy": "A", "le": "+Inf"}, ts, 20*ts)
		db.add(labels{"__name__": "inflight", "name": "x"}, ts, 7)
	}
	db.add(labels{"__name__": "inflight", "name": "gone"}, 1, 3) // stale at 10
	for _, c := range []struct {
		q    string
		want map[string]float64 // by the value of the label named, "" for none
		by   string
	}{
		{`sum by (policy) (rate(calls_total[$__rate_interval]))`, map[string]float64{"A": 2, "B": 1}, "policy"},
		{`sum by (policy) (rate(calls_total{outcome="success"}[2m])) / sum by (policy) (rate(calls_total[2m]))`, map[string]float64{"A": 0.5, "B": 1}, "policy"},
		{`sum by (outcome) (rate(calls_total{outcome=~"gave_up|x"}[1m]))`, map[string]float64{"gave_up": 1}, "outcome"},
		{`increase(calls_total{policy="B"}[$__rate_interval])`, map[string]float64{"B": 4}, "policy"},
		{`histogram_quantile(0.5, sum by (le, policy) (rate(d_bucket[$__rate_interval])))`, map[string]float64{"A": 0.1}, "policy"},
		{`histogram_quantile(0.75, sum by (le, policy) (rate(d_bucket[$__rate_interval])))`, map[string]float64{"A": 0.55}, "policy"},
		{`inflight`, map[string]float64{"x": 7}, "name"},
	} {
		v, err := mustParse(t, c.q).eval(db, 10, 4.5)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		got := map[string]float64{}
		for _, s := range v {
			got[s.l[c.by]] = s.v
		}
		if len(got) != len(c.want) {
			t.Errorf("%s = %v, want %v", c.q, got, c.want)
			continue
		}
		for k, w := range c.want {
			if math.Abs(got[k]-w) > 1e-9 {
				t.Errorf("%s = %v, want %v", c.q, got, c.want)
			}
		}
	}
	for _, q := range []string{`avg(calls_total)`, `calls_total[1m]`, `rate(calls_total)`, `calls_total{policy!="A"}`,
		`sum by (policy`, `calls_total{policy="A"`, `rate(calls_total[1m`} { // the last three unclosed
		if n, err := parse(q); err == nil {
			if _, err := n.eval(db, 10, 4.5); err == nil {
				t.Errorf("%s: no error, want one (outside the subset)", q)
			}
		}
	}
}

func mustParse(t *testing.T, q string) node {
	t.Helper()
	n, err := parse(q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
