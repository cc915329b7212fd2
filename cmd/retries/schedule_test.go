package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// scheduleRows returns the rows of a schedule's table: attempt, min, p50,
// p95, max and the bar.
func scheduleRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 2 && f[0] == "AFTER" && f[1] == "ATTEMPT":
			in = true
		case in && len(f) > 0 && strings.Contains(l, "|"):
			nums, bar, _ := strings.Cut(l, "|")
			row := append(strings.Fields(nums), "|"+bar)
			if len(row) != 6 {
				t.Fatalf("schedule row %q has %d cells, want 6", l, len(row))
			}
			rows = append(rows, row)
		default:
			in = false
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no schedule rows in:\n%s", out)
	}
	return rows
}

func TestScheduleDeterministic(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, "schedule", "docv1", "-samples", "50")
	if code != exitOK || stderr != "" {
		t.Fatalf("run(schedule docv1) = %d, stderr %q", code, stderr)
	}
	golden(t, "schedule_docv1.golden", out)

	for _, tc := range []struct {
		policy string
		want   [][]string // attempt, min, p50, p95, max
	}{
		{"DOCV1", [][]string{{"1", "1", "1", "1", "1"}, {"2", "2", "2", "2", "2"}}},
		{"ControlPlane", [][]string{{"1", "1", "1", "1", "1"}, {"2", "2", "2", "2", "2"}}},
		{"urlvalidation", [][]string{{"1", "1", "1", "1", "1"}, {"2", "2", "2", "2", "2"}}},
		{"Visit", [][]string{{"1", "0", "0", "0", "0"}, {"2", "0", "0", "0", "0"}}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			code, out, _ := runCmd(t, "schedule", tc.policy, "-samples", "20")
			if code != exitOK {
				t.Fatalf("run(schedule %s) = %d", tc.policy, code)
			}
			var got [][]string
			for _, r := range scheduleRows(t, out) {
				got = append(got, r[:5])
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("schedule %s rows = %q, want %q", tc.policy, got, tc.want)
			}
		})
	}
}

func TestScheduleBars(t *testing.T) {
	t.Parallel()
	_, out, _ := runCmd(t, "schedule", "docv1", "-samples", "1")
	rows := scheduleRows(t, out)
	// DocV1 waits 1 s then 2 s on a 0-2 s scale: half a bar, then a full one.
	for i, want := range []string{"|" + strings.Repeat("#", barWidth/2) + strings.Repeat(" ", barWidth/2) + "|", "|" + strings.Repeat("#", barWidth) + "|"} {
		if got := rows[i][5]; got != want {
			t.Errorf("bar %d = %q, want %q", i+1, got, want)
		}
	}
}

func TestScheduleRandom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		rows     int
		maxWaits []float64 // the bound of each wait
		note     string
	}{
		{[]string{"schedule", "query", "-samples", "2000"}, 4, []float64{1.5, 3, 6, 12}, "gives up after attempt 5"},
		{[]string{"schedule", "-attempts", "9", "Query"}, 4, []float64{1.5, 3, 6, 12}, "no wait follows attempt 5"},
		{[]string{"schedule", "query", "-attempts", "2"}, 2, []float64{1.5, 3}, "gives up after attempt 5"},
		{[]string{"schedule", "throttle", "-samples", "500"}, neverWaits, []float64{1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10, 10}, "never gives up"},
		{[]string{"schedule", "throttle", "-attempts", "20", "-samples", "100"}, 20, nil, "never gives up"},
	} {
		t.Run(strings.Join(tc.args[1:], "_"), func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCmd(t, tc.args...)
			if code != exitOK {
				t.Fatalf("run(%q) = %d, stderr %q", tc.args, code, stderr)
			}
			if !strings.Contains(out, tc.note) {
				t.Errorf("run(%q) does not say %q:\n%s", tc.args, tc.note, out)
			}
			rows := scheduleRows(t, out)
			if len(rows) != tc.rows {
				t.Fatalf("run(%q) has %d rows, want %d", tc.args, len(rows), tc.rows)
			}
			for i, r := range rows {
				var v [4]float64
				for j := range v {
					f, err := strconv.ParseFloat(r[j+1], 64)
					if err != nil {
						t.Fatalf("row %q: %v", r, err)
					}
					v[j] = f
				}
				if !(v[0] <= v[1] && v[1] <= v[2] && v[2] <= v[3]) {
					t.Errorf("row %q: min, p50, p95, max out of order", r)
				}
				if i < len(tc.maxWaits) && (v[3] > tc.maxWaits[i] || v[3] < 0.9*tc.maxWaits[i]) {
					t.Errorf("row %q: max %v, want at most and near %v", r, v[3], tc.maxWaits[i])
				}
			}
		})
	}
}

// TestSampleSchedulePassesPrevWait checks that each sampled schedule feeds
// its previous draw to the next wait as State.PrevWait, as Do does.
func TestSampleSchedulePassesPrevWait(t *testing.T) {
	t.Parallel()
	p := retries.New(
		retries.WithStop(retries.StopAfterAttempt(5)),
		retries.WithWait(retries.WaitFunc(func(s retries.State) time.Duration { return s.PrevWait + time.Second })),
	)
	sc := sampleSchedule(namedPolicy{"growing", p}, 0, 3)
	var got []time.Duration
	for _, s := range sc.stats {
		if s.min != s.max {
			t.Errorf("wait %d: min %v != max %v for a deterministic wait", s.n, s.min, s.max)
		}
		got = append(got, s.p50)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("sampled waits = %v, want %v", got, want)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {0.5, 50}, {0.95, 95}, {1, 100}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ v, want float64 }{{0, 1}, {1, 1}, {1.1, 1.2}, {2, 2}, {8.6, 10}, {12, 12}, {0.3, 0.3}, {13, 15}} {
		if got := niceCeil(tc.v); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// svgSeries parses an SVG document, failing the test if it is not
// well-formed XML, and returns the ids of its <g class="series"> elements
// and, per id, the classes of the marks drawn in it.
func svgSeries(t *testing.T, r io.Reader) (ids []string, marks map[string][]string) {
	t.Helper()
	dec := xml.NewDecoder(r)
	marks = map[string][]string{}
	var stack []string // ids of the enclosing series, "" for other elements
	root := true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root {
				if el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element = %v, want svg in the SVG namespace", el.Name)
				}
				root = false
			}
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			id := ""
			if el.Name.Local == "g" && attr["class"] == "series" {
				id = attr["id"]
				ids = append(ids, id)
			} else if len(stack) > 0 {
				id = stack[len(stack)-1]
				if c := attr["class"]; c != "" && id != "" {
					marks[id] = append(marks[id], c)
				}
			}
			stack = append(stack, id)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if root {
		t.Fatal("SVG is empty")
	}
	return ids, marks
}

func TestScheduleSVG(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		policy string
		want   []string
		random []string // series with a band
	}{
		{"all", []string{"series-query", "series-docv1", "series-throttle", "series-syncrequest", "series-visit", "series-controlplane", "series-urlvalidation"}, []string{"series-query", "series-throttle", "series-syncrequest"}},
		{"Throttle", []string{"series-throttle"}, []string{"series-throttle"}},
		{"docv1", []string{"series-docv1"}, nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, tc.policy+".svg")
			code, out, stderr := runCmd(t, "schedule", tc.policy, "-samples", "200", "-svg", file)
			if code != exitOK || !strings.Contains(out, "wrote "+file) {
				t.Fatalf("run(schedule %s -svg) = %d, stdout %q, stderr %q", tc.policy, code, out, stderr)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ids, marks := svgSeries(t, bytes.NewReader(data))
			if !slices.Equal(ids, tc.want) {
				t.Errorf("series = %q, want %q", ids, tc.want)
			}
			for _, id := range ids {
				hasBand := slices.Contains(marks[id], "band") || slices.Contains(marks[id], "range")
				if want := slices.Contains(tc.random, id); hasBand != want {
					t.Errorf("%s has a band: %v, want %v (marks %q)", id, hasBand, want, marks[id])
				}
				if !slices.Contains(marks[id], "p50") {
					t.Errorf("%s has no median line (marks %q)", id, marks[id])
				}
			}
			for _, label := range []string{"wait (s)", "attempt n"} {
				if !bytes.Contains(data, []byte(label)) {
					t.Errorf("SVG has no axis label %q", label)
				}
			}
		})
	}
}

// TestCommittedSVG checks the chart the README shows.
func TestCommittedSVG(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("..", "..", "docs", "schedules.svg"))
	if err != nil {
		t.Fatalf("%v (go run ./cmd/retries schedule all -svg docs/schedules.svg writes it)", err)
	}
	defer f.Close()
	ids, _ := svgSeries(t, f)
	if len(ids) != len(allPolicies()) {
		t.Errorf("docs/schedules.svg has series %q, want one per policy", ids)
	}
}

func TestScheduleSVGUnwritable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "no", "such", "dir", "x.svg")
	code, _, stderr := runCmd(t, "schedule", "visit", "-samples", "1", "-svg", file)
	if code != exitFail || !strings.Contains(stderr, "no such file") {
		t.Errorf("run(schedule -svg %s) = %d, stderr %q; want %d and the error", file, code, stderr, exitFail)
	}
}
