package feed

import "testing"

// TestRoundTable: the decisions of round.go, row by row, as their tables
// say; each row is hit, and the first row that holds wins.
func TestRoundTable(t *testing.T) {
	all := roundEnd{retried: true, multi: true, elsewhere: true}
	for _, tc := range []struct {
		name string
		r    roundEnd
		want step
	}{
		{"1 unknown", roundEnd{unknown: true, retried: true, multi: true, elsewhere: true, dial: true}, stand},
		{"2 ended", roundEnd{ended: true, retried: true, multi: true, elsewhere: true, dial: true}, stand},
		{"3 moved", roundEnd{ended: true, moved: true, retried: true, multi: true, refused: true}, move},
		{"4 moved, one endpoint", roundEnd{ended: true, moved: true, retried: true, dial: true}, stand},
		{"4 moved, not retried", roundEnd{ended: true, moved: true, multi: true, elsewhere: true}, stand},
		{"5 detour", all, detour},
		{"5 detour after a refused dial", roundEnd{retried: true, multi: true, elsewhere: true, refused: true, dial: true}, detour},
		{"5 not after a refused answer", roundEnd{retried: true, multi: true, elsewhere: true, refused: true}, hear},
		{"5 nowhere else", roundEnd{retried: true, multi: true, dial: true}, redial},
		{"6 redial", roundEnd{dial: true}, redial},
		{"6 redials used up", roundEnd{dial: true, redials: maxRedials}, stand},
		{"7 hear", roundEnd{retried: true}, hear},
		{"7 redials used up", roundEnd{retried: true, redials: maxRedials}, stand},
		{"8 stand", roundEnd{}, stand},
	} {
		if got := tc.r.next(); got != tc.want {
			t.Errorf("%s: %+v.next() = %d, want %d", tc.name, tc.r, got, tc.want)
		}
	}
	for _, tc := range []struct {
		alone, send, full bool
		waiting           int64
		want              wordPlan
	}{
		{false, true, true, 9, wait},
		{true, true, false, 1, standNow},
		{true, false, true, witnesses + 1, witness},
		{true, false, true, witnesses, standNow},
		{true, false, false, 1, wait},
	} {
		if got := planWord(tc.alone, tc.send, tc.full, tc.waiting); got != tc.want {
			t.Errorf("planWord(%v, %v, %v, %d) = %d, want %d", tc.alone, tc.send, tc.full, tc.waiting, got, tc.want)
		}
	}
	for _, tc := range []struct {
		word, opened, afterAck bool
		again, after           bool
	}{
		{true, true, true, true, true},
		{true, true, false, true, false},
		{true, false, false, true, true},
		{true, false, true, false, true},
		{false, false, false, false, false},
	} {
		if again, after := heard(tc.word, tc.opened, tc.afterAck); again != tc.again || after != tc.after {
			t.Errorf("heard(%v, %v, %v) = %v, %v; want %v, %v", tc.word, tc.opened, tc.afterAck, again, after, tc.again, tc.after)
		}
	}
}
