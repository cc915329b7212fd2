package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/seed32e55400/retries"
)

// Result is what a container answered a query with a 200: its hits, the
// total count, the coverage, and the errors it returned beside them (a
// 200 may carry both), with which endpoint answered and how many requests
// the query took.
type Result struct {
	Hits       []Hit
	TotalCount int64
	Coverage   Coverage
	// Errors are the errors the result carries (root.errors): a 200 with
	// hits and errors is a partial result, not a failure.
	Errors []Error
	// Endpoint is the URL of the container that answered; Requests, the
	// requests the query took, retries and hedges included; Hedged, whether
	// the answer is a hedge's.
	Endpoint string
	Requests int
	Hedged   bool
	// Raw is the result's JSON as the container wrote it, for what the
	// fields above leave out (a renderer's own fields, a degraded reason
	// of a newer Vespa).
	Raw json.RawMessage
}

// Hit is one hit of a result (a child of its root): a document, or a hit
// group (with grouping, the root group, a group list or a group; with
// federation, a source's hits), whose own hits are its Children, to any
// depth. Relevance reads Vespa's "NaN", "Infinity" and "-Infinity" too.
type Hit struct {
	ID        string          `json:"id"`
	Relevance float64         `json:"relevance"`
	Source    string          `json:"source"`
	Types     []string        `json:"types,omitempty"` // the hit's types, as "summary" or "grouphit"
	Fields    json.RawMessage `json:"fields"`
	// Label is a group list's ("artist"); Value a group's (Vespa writes it
	// as a JSON string, a number's too: "2"), or Limits a bucket group's;
	// Continuation the root group's ("this") or a group list's ("next",
	// "prev"): tokens for the grouping's continuations.
	Label        string            `json:"label,omitempty"`
	Value        json.RawMessage   `json:"value,omitempty"`
	Limits       *Bucket           `json:"limits,omitempty"`
	Continuation map[string]string `json:"continuation,omitempty"`
	Children     []Hit             `json:"children,omitempty"`
}

// Bucket is a bucket group's limits, as Vespa writes them: strings
// ("1.0"), from included, to excluded.
type Bucket struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// UnmarshalJSON reads a hit as Vespa renders it, with a relevance that is
// a number or one of the strings its JSON writer gives a value that is no
// number: "NaN", "Infinity", "-Infinity".
func (h *Hit) UnmarshalJSON(b []byte) error {
	type plain Hit
	var v struct {
		plain
		Relevance json.RawMessage `json:"relevance"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*h = Hit(v.plain)
	switch r := string(v.Relevance); r {
	case "", "null":
	case `"NaN"`:
		h.Relevance = math.NaN()
	case `"Infinity"`:
		h.Relevance = math.Inf(1)
	case `"-Infinity"`:
		h.Relevance = math.Inf(-1)
	default:
		f, err := strconv.ParseFloat(r, 64)
		if err != nil {
			return fmt.Errorf("query: a hit's relevance %s is no number", r)
		}
		h.Relevance = f
	}
	return nil
}

// Coverage is root.coverage: how much of the corpus the result covers,
// and why not all of it.
type Coverage struct {
	Coverage    int   `json:"coverage"` // percent
	Documents   int64 `json:"documents"`
	Full        bool  `json:"full"`
	Nodes       int   `json:"nodes"`
	Results     int   `json:"results"`
	ResultsFull int   `json:"resultsFull"`
	// Degraded says why the coverage is partial; nil when it is not.
	Degraded *Degraded `json:"degraded"`
}

// Degraded is root.coverage.degraded: each reason Vespa gives for a
// partial result. Vespa writes the object only when a reason is set, with
// every reason it knows as true or false.
type Degraded struct {
	MatchPhase      bool // match-phase limited the hits, by design
	Timeout         bool // the soft timeout cut the query
	AdaptiveTimeout bool // a node did not answer within the adaptive timeout
	AnnTimeout      bool // a nearest-neighbor search was cut by its time limit ("anntimeout")
	NonIdealState   bool // the content cluster is not in its ideal state
	// Other are the reasons set that this package does not know (a newer
	// Vespa's), by their names, sorted.
	Other []string
}

// degradedNames are the reasons Degraded has a field for, by Vespa's
// names, in the order of Reasons.
var degradedNames = [...]string{"match-phase", "timeout", "adaptive-timeout", "anntimeout", "non-ideal-state"}

// flags returns d's known reasons in the order of degradedNames.
func (d *Degraded) flags() [len(degradedNames)]*bool {
	return [...]*bool{&d.MatchPhase, &d.Timeout, &d.AdaptiveTimeout, &d.AnnTimeout, &d.NonIdealState}
}

// UnmarshalJSON reads each reason by its name, set when true; one of
// another name goes to Other unless it is false or null (a newer Vespa
// might give a reason as more than a flag).
func (d *Degraded) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = Degraded{}
	flags := d.flags()
	for name, v := range m {
		if i := slices.Index(degradedNames[:], name); i >= 0 {
			*flags[i] = string(v) == "true"
		} else if v := string(v); v != "false" && v != "null" {
			d.Other = append(d.Other, name)
		}
	}
	slices.Sort(d.Other)
	return nil
}

// Reasons returns the reasons set, by Vespa's names: "match-phase",
// "timeout", "adaptive-timeout", "anntimeout", "non-ideal-state", then
// Other.
func (d *Degraded) Reasons() []string {
	if d == nil {
		return nil
	}
	var r []string
	for i, set := range d.flags() {
		if *set {
			r = append(r, degradedNames[i])
		}
	}
	return append(r, d.Other...)
}

// Error is one of root.errors.
type Error struct {
	Code    int    `json:"code"`
	Summary string `json:"summary"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

// String describes the error as "12 Timed out: MESSAGE (SOURCE)".
func (e Error) String() string {
	s := e.Summary
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return fmt.Sprintf("%d %s", e.Code, s)
}

// Complete reports whether the result is whole: no error, and full
// coverage (or none reported, as a container without content says).
func (r *Result) Complete() bool {
	return len(r.Errors) == 0 && (r.Coverage == Coverage{} || r.Coverage.Full && r.Coverage.Degraded == nil)
}

// StatusError is a query the container answered with a status other than
// 200, after any retries: Status, and the errors its body carried.
type StatusError struct {
	Status   int
	Errors   []Error
	Endpoint string
	Requests int
	// down is set on an answer from an endpoint whose breaker is open:
	// a failure of the endpoint, not of the query.
	down bool
}

// Error says the status and the errors the answer carried.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("query: %d %s", e.Status, http.StatusText(e.Status))
	if len(e.Errors) > 0 {
		parts := make([]string, len(e.Errors))
		for i, x := range e.Errors {
			parts[i] = x.String()
		}
		s += ": " + strings.Join(parts, "; ")
	}
	return s
}

// SoftDoomed reports whether the container gave up on the query while
// setting it up ("soft doomed during query setup"), which asking again
// does not change (vespa#34008): the query takes longer than its timeout
// allows whatever the container.
func (e *StatusError) SoftDoomed() bool {
	for _, x := range e.Errors {
		if strings.Contains(strings.ToLower(x.Message+" "+x.Summary), "soft doomed") {
			return true
		}
	}
	return false
}

// ErrNotJSON is why a body that should be a Vespa result could not be
// read as one; the error matches it.
var ErrNotJSON = errors.New("query: the answer is not a Vespa result")

// answer is the part of a Vespa result a client reads.
type answer struct {
	Root *struct {
		Fields struct {
			TotalCount int64 `json:"totalCount"`
		} `json:"fields"`
		Coverage *Coverage `json:"coverage"`
		Errors   []Error   `json:"errors"`
		Children []Hit     `json:"children"`
	} `json:"root"`
}

// parse reads a Vespa result body into r's hits, count, coverage and
// errors. A body with no root is an error matching ErrNotJSON.
func parse(body []byte, r *Result) error {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if a.Root == nil {
		return fmt.Errorf("%w: no root", ErrNotJSON)
	}
	r.Hits, r.TotalCount, r.Errors, r.Raw = a.Root.Children, a.Root.Fields.TotalCount, a.Root.Errors, body
	if c := a.Root.Coverage; c != nil {
		r.Coverage = *c
		if d := c.Degraded; d != nil && len(d.Reasons()) == 0 {
			r.Coverage.Degraded = nil // every reason false: the result is whole
		}
	}
	return nil
}

// As lets the retry predicates of package retries read the status: a
// StatusError is a *retries.StatusError with its code.
func (e *StatusError) As(target any) bool {
	if t, ok := target.(**retries.StatusError); ok {
		*t = &retries.StatusError{StatusCode: e.Status, Status: fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))}
		return true
	}
	return false
}
