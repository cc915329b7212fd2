package updates

import (
	"strings"
	"testing"
)

// TestRepeats: the rule, operation by operation, with match deciding by
// its own operation, and what is not an update refused as repeating.
func TestRepeats(t *testing.T) {
	for _, tc := range []struct {
		fields  string
		repeats bool
		err     string // a part of the error, if any
	}{
		{`{"x": {"assign": 2}}`, false, ""},
		{`{"tags": {"remove": {"a": 0}}}`, false, ""},
		{`{"x": {"assign": 2}, "tags": {"remove": ["a"]}}`, false, ""},
		{`{"n": {"increment": 1}}`, true, ""},
		{`{"n": {"decrement": 1}}`, true, ""},
		{`{"n": {"multiply": 2}}`, true, ""},
		{`{"n": {"divide": 2}}`, true, ""},
		{`{"tags": {"add": ["x"]}}`, true, ""},
		{`{"t": {"modify": {"operation": "add", "cells": []}}}`, true, ""},
		{`{"x": {"assign": 2}, "n": {"increment": 1}}`, true, ""},
		{`{"w": {"match": {"element": "x", "assign": 1}}}`, false, ""},
		{`{"w": {"match": {"element": "x", "increment": 1}}}`, true, ""},
		{`{}`, false, ""},
		{`{"x": {"incremnt": 1}}`, true, `"incremnt" is not an update operation`},
		{`{"w": {"match": {"element": 0, "match": {}}}}`, true, `"match" is not an update operation`},
		{`{"w": {"match": 1}}`, true, "match: not an object of operations"},
		{`{"x": 1}`, true, `field "x": not an object of operations`},
		{`{"x": {}}`, true, `field "x": not an object of operations`},
		{`[1]`, true, `not a JSON object`},
		{`null`, true, `not a JSON object`},
	} {
		repeats, err := Repeats([]byte(tc.fields))
		if repeats != tc.repeats || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Repeats(%s) = %v, %v; want %v, error %q", tc.fields, repeats, err, tc.repeats, tc.err)
		}
	}
}

// BenchmarkRepeats is the cost of the rule for one update of two fields,
// which feed pays for each unconditional update it reads.
func BenchmarkRepeats(b *testing.B) {
	fields := []byte(`{"year": {"assign": 2016}, "plays": {"increment": 1}}`)
	b.ReportAllocs()
	for b.Loop() {
		if r, err := Repeats(fields); !r || err != nil {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkRepeatsWellFormed is what feed pays: the input is checked by
// its reader already.
func BenchmarkRepeatsWellFormed(b *testing.B) {
	fields := []byte(`{"year": {"assign": 2016}, "plays": {"increment": 1}}`)
	b.ReportAllocs()
	for b.Loop() {
		if r, err := RepeatsWellFormed(fields); !r || err != nil {
			b.Fatal(r, err)
		}
	}
}
