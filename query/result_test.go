package query

import (
	"encoding/json"
	"math"
	"testing"
)

// groupingBody is a grouping result as Vespa's JSON renderer writes one
// (the query API's grouping examples): the root's group, a group list
// with its continuation, groups with a string and a number value, and a
// hit list nested in a group whose hits' relevance is "NaN" (an order by
// an attribute) and "Infinity".
const groupingBody = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":7},
"coverage":{"coverage":100,"documents":7,"full":true,"nodes":1,"results":1,"resultsFull":1},
"children":[{"id":"group:root:0","relevance":1.0,"continuation":{"this":""},
 "children":[{"id":"grouplist:customer","relevance":1.0,"label":"customer","continuation":{"next":"BGAAABEBGBC","prev":"BGAAABEABGB"},
  "children":[{"id":"group:string:Jones","relevance":1.0,"value":"Jones","fields":{"sum(price)":39816},
    "children":[{"id":"hitlist:hits","relevance":1.0,"label":"hits",
      "children":[{"id":"index:music/0/8f13a2fd36ba4b4e","relevance":"NaN","source":"purchase","fields":{"price":1}},
                  {"id":"index:music/0/2c4b6d04d9f9cb4b","relevance":"-Infinity","source":"purchase","fields":{"price":2}}]}]},
   {"id":"group:long:3","relevance":"Infinity","value":3,"fields":{"count()":2}}]}]}]}}`

// TestGroupingResult: a grouping result keeps its groups (a Hit's
// Children, to any depth, with their labels, values and continuations),
// a relevance that is "NaN" or infinite is read, and Result.Raw is the
// body as written. Before, Hit had no children, so every group was lost,
// and a "NaN" relevance failed the whole result.
func TestGroupingResult(t *testing.T) {
	t.Parallel()
	var r Result
	if err := parse([]byte(groupingBody), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Hits) != 1 || len(r.Hits[0].Children) != 1 {
		t.Fatalf("hits %+v: want the root group and its group list", r.Hits)
	}
	list := r.Hits[0].Children[0]
	if list.Label != "customer" || list.Continuation["next"] != "BGAAABEBGBC" || len(list.Children) != 2 {
		t.Fatalf("the group list %+v", list)
	}
	jones, three := list.Children[0], list.Children[1]
	if string(jones.Value) != `"Jones"` || string(three.Value) != "3" || !math.IsInf(three.Relevance, 1) {
		t.Errorf("the groups %+v and %+v", jones, three)
	}
	hits := jones.Children[0].Children
	if len(hits) != 2 || !math.IsNaN(hits[0].Relevance) || !math.IsInf(hits[1].Relevance, -1) || string(hits[1].Fields) != `{"price":2}` {
		t.Errorf("the hits in the group: %+v", hits)
	}
	var sum struct {
		Root struct{ Fields struct{ TotalCount int } }
	}
	if err := json.Unmarshal(r.Raw, &sum); err != nil || sum.Root.Fields.TotalCount != 7 || r.TotalCount != 7 {
		t.Errorf("Raw: %v, %+v", err, sum)
	}
	var h Hit
	if err := json.Unmarshal([]byte(`{"id":"x","relevance":"high"}`), &h); err == nil {
		t.Error(`a relevance of "high": read`)
	}
}
