package query

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// The bodies below have the shapes Vespa's JSON renderer writes
// (container-search's JsonRenderer and its tests, as of August 2026): the
// fields of a hit in its order (id, relevance, types, source, a group's
// value or limits, a list's label and continuations, fields, children);
// a group's value a string whatever its type; a bucket group's limits two
// strings; root.coverage.degraded written only when a reason is set, then
// with all five reasons.

// federatedBody: a hit group of a source beside documents, each hit with
// its types, and an error of the root as the renderer writes one.
const federatedBody = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":3},
"coverage":{"coverage":100,"documents":500,"full":true,"nodes":1,"results":1,"resultsFull":1},
"errors":[{"code":18,"summary":"Internal server error.","source":"news","message":"the backend went away"}],
"children":[
 {"id":"source:news","relevance":1.0,"types":["grouphit"],"fields":{"label":"news"},
  "children":[{"id":"id:news:article::17","relevance":0.9,"types":["summary"],"source":"news","fields":{"title":"a"}}]},
 {"id":"id:web:page::3","relevance":0.95,"types":["summary"],"source":"web","fields":{"title":"b"}}]}}`

// bucketBody: a grouping by a bucketed number: a group with limits, and a
// group of a number whose value is written as a string.
const bucketBody = `{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":1},
"children":[{"id":"group:root:0","relevance":1.0,"continuation":{"this":"BKAAAAABAG"},
 "children":[{"id":"grouplist:price","relevance":1.0,"label":"price","continuation":{"next":"BKAAABCABGAAAAAA","prev":"BKAAABCABAAA"},
  "children":[
   {"id":"group:double_bucket:1.0:2.0","relevance":1.0,"limits":{"from":"1.0","to":"2.0"},"fields":{"count()":7}},
   {"id":"group:long:3","relevance":0.5,"value":"3","fields":{"count()":2}}]}]}]}}`

// TestRenderedResults reads results as Vespa's renderer writes them: a
// source's hit group keeps its children, every hit its types, the root its
// errors; a bucket group its limits, a number group its value, a group
// list both its continuations and the root group its own.
func TestRenderedResults(t *testing.T) {
	t.Parallel()
	var fed Result
	if err := parse([]byte(federatedBody), &fed); err != nil {
		t.Fatal(err)
	}
	if len(fed.Hits) != 2 || !slices.Equal(fed.Hits[0].Types, []string{"grouphit"}) || len(fed.Hits[0].Children) != 1 {
		t.Fatalf("hits %+v: want the source's group, with its document, and a document", fed.Hits)
	}
	if d := fed.Hits[0].Children[0]; d.ID != "id:news:article::17" || d.Source != "news" || !slices.Equal(d.Types, []string{"summary"}) {
		t.Errorf("the group's document %+v", d)
	}
	if len(fed.Errors) != 1 || fed.Errors[0].String() != "18 Internal server error.: the backend went away (news)" || fed.Complete() {
		t.Errorf("errors %v, complete %v: want the root's error, and not complete", fed.Errors, fed.Complete())
	}

	var b Result
	if err := parse([]byte(bucketBody), &b); err != nil {
		t.Fatal(err)
	}
	root := b.Hits[0]
	list := root.Children[0]
	if root.Continuation["this"] != "BKAAAAABAG" || list.Label != "price" || list.Continuation["prev"] != "BKAAABCABAAA" || len(list.Children) != 2 {
		t.Fatalf("the root group %+v and its list %+v", root, list)
	}
	bucket, three := list.Children[0], list.Children[1]
	if bucket.Limits == nil || *bucket.Limits != (Bucket{From: "1.0", To: "2.0"}) || bucket.Value != nil {
		t.Errorf("the bucket group %+v: want limits 1.0 to 2.0 and no value", bucket)
	}
	if string(three.Value) != `"3"` || three.Limits != nil || string(three.Fields) != `{"count()":2}` {
		t.Errorf("the number group %+v", three)
	}
}

// renderedDegraded is a result whose coverage has the degraded object the
// renderer writes for a set of reasons, given as the bits of
// Coverage.degradedReason (match-phase 1, timeout 2, adaptive-timeout 4,
// anntimeout 8, non-ideal-state 16), with extra reasons after.
func renderedDegraded(bits int, extra string) string {
	var b strings.Builder
	b.WriteString(`{"root":{"id":"toplevel","relevance":1.0,"fields":{"totalCount":0},"coverage":{"coverage":83,"documents":500,"degraded":{`)
	for i, name := range degradedNames {
		fmt.Fprintf(&b, "%q:%v,", name, bits&(1<<i) != 0)
	}
	fmt.Fprintf(&b, `%s"":false},"full":false,"nodes":1,"results":1,"resultsFull":0}}}`, extra)
	return b.String()
}

// TestEveryDegradedReason: each of the 32 sets of the five reasons Vespa
// writes is read as that set, by name and in Vespa's order; a reason of
// another name that is set is kept by its name (Other), even given as an
// object, one false or null is not; none set is a whole result. Before,
// "anntimeout" was dropped: such a result was incomplete with no reason.
func TestEveryDegradedReason(t *testing.T) {
	t.Parallel()
	for bits := range 1 << len(degradedNames) {
		var r Result
		if err := parse([]byte(renderedDegraded(bits, "")), &r); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, name := range degradedNames {
			if bits&(1<<i) != 0 {
				want = append(want, name)
			}
		}
		if got := r.Coverage.Degraded.Reasons(); !slices.Equal(got, want) {
			t.Errorf("reasons %d: got %q, want %q", bits, got, want)
		}
		if bits == 0 && r.Coverage.Degraded != nil {
			t.Errorf("no reason set: Degraded = %+v, want nil", r.Coverage.Degraded)
		}
	}
	var r Result
	if err := parse([]byte(renderedDegraded(8, `"zz-later":true,"a-later":{"nodes":2},"unset-later":false,"null-later":null,`)), &r); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Coverage.Degraded.Reasons(), []string{"anntimeout", "a-later", "zz-later"}; !slices.Equal(got, want) {
		t.Errorf("reasons %q, want %q", got, want)
	}
}

// TestStatsCountUnknownReasons: a Client's Stats count a degraded reason
// it has no field for by its name, beside the five it knows.
func TestStatsCountUnknownReasons(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, renderedDegraded(8, `"later":true,`))
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URLs: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if _, err := c.Search(t.Context(), Query{}); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Stats()
	if s.Incomplete != 2 || s.Degraded["anntimeout"] != 2 || s.Degraded["later"] != 2 || s.Degraded["timeout"] != 0 || len(s.Degraded) != 6 {
		t.Errorf("Stats().Incomplete %d, Degraded %v: want 2, anntimeout and later 2 each", s.Incomplete, s.Degraded)
	}
}
