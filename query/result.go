package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
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

// Hit is one hit of a result (a child of its root): a document, or, with
// grouping, a group list or a group, whose own hits are its Children, to
// any depth. Relevance reads Vespa's "NaN", "Infinity" and "-Infinity"
// too.
type Hit struct {
	ID        string          `json:"id"`
	Relevance float64         `json:"relevance"`
	Source    string          `json:"source"`
	Fields    json.RawMessage `json:"fields"`
	// Label is a group list's ("artist"), Value a group's (its JSON value:
	// "a", or a number), Continuation a group list's or a group's
	// ("next", "prev", "this": tokens for the grouping's continuations).
	Label        string            `json:"label,omitempty"`
	Value        json.RawMessage   `json:"value,omitempty"`
	Continuation map[string]string `json:"continuation,omitempty"`
	Children     []Hit             `json:"children,omitempty"`
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
// partial result.
type Degraded struct {
	MatchPhase      bool `json:"match-phase"`      // match-phase limited the hits, by design
	Timeout         bool `json:"timeout"`          // the soft timeout cut the query
	AdaptiveTimeout bool `json:"adaptive-timeout"` // a node did not answer within the adaptive timeout
	NonIdealState   bool `json:"non-ideal-state"`  // the content cluster is not in its ideal state
}

// Reasons returns the reasons set, by Vespa's names: "match-phase",
// "timeout", "adaptive-timeout", "non-ideal-state".
func (d *Degraded) Reasons() []string {
	if d == nil {
		return nil
	}
	var r []string
	for _, x := range []struct {
		set  bool
		name string
	}{{d.MatchPhase, "match-phase"}, {d.Timeout, "timeout"}, {d.AdaptiveTimeout, "adaptive-timeout"}, {d.NonIdealState, "non-ideal-state"}} {
		if x.set {
			r = append(r, x.name)
		}
	}
	return r
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
		if d := c.Degraded; d != nil && *d == (Degraded{}) {
			r.Coverage.Degraded = nil // Vespa writes every reason false for a whole result
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
