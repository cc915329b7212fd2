package feed_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/visit"
)

// TestSafeToRepeatOneRule: a feed's operation and a bulk update by
// selection are judged by one rule. An update that only assigns or removes
// (a match by its own operation) is safe to repeat, for both; arithmetic,
// an add and a modify are not; a condition makes a feed's update unsafe;
// puts and removes are safe. (TestParseOp checks that the reader's own
// operations are sent by the same rule.)
func TestSafeToRepeatOneRule(t *testing.T) {
	for _, tc := range []struct {
		fields string
		safe   bool
	}{
		{`{"x": {"assign": 2}}`, true},
		{`{"tags": {"remove": {"a": 0}}}`, true},
		{`{"w": {"match": {"element": "x", "assign": 1}}}`, true},
		{`{"w": {"match": {"element": "x", "increment": 1}}}`, false},
		{`{"n": {"increment": 1}}`, false},
		{`{"tags": {"add": ["x"]}}`, false},
		{`{"t": {"modify": {"operation": "multiply", "cells": []}}}`, false},
		{`{"x": {"assign": 2}, "n": {"divide": 2}}`, false},
	} {
		op := feed.Operation{Kind: feed.Update, ID: "id:music:music::1", Fields: json.RawMessage(tc.fields)}
		if got := op.SafeToRepeat(); got != tc.safe {
			t.Errorf("feed: %s: SafeToRepeat = %v, want %v", tc.fields, got, tc.safe)
		}
		got, err := visit.SafeToRepeat(json.RawMessage(`{"fields":` + tc.fields + `}`))
		if err != nil || got != tc.safe {
			t.Errorf("visit: %s: SafeToRepeat = %v, %v; want %v", tc.fields, got, err, tc.safe)
		}
		op.Condition = "music.n > 0"
		if op.SafeToRepeat() {
			t.Errorf("feed: %s with a condition: safe to repeat", tc.fields)
		}
		// The reader's operation agrees.
		line := `{"update": "id:music:music::1", "fields": ` + tc.fields + "}\n"
		for read, err := range feed.Read(strings.NewReader(line)) {
			if err != nil || read.SafeToRepeat() != tc.safe {
				t.Errorf("feed.Read(%s): %v, SafeToRepeat %v; want %v", line, err, read.SafeToRepeat(), tc.safe)
			}
		}
	}
	for _, op := range []feed.Operation{
		{Kind: feed.Put, ID: "id:music:music::1", Fields: json.RawMessage(`{"n": 1}`), Condition: "music.n > 0"},
		{Kind: feed.Remove, ID: "id:music:music::1"},
	} {
		if !op.SafeToRepeat() {
			t.Errorf("%v: not safe to repeat", op.Kind)
		}
	}
}
