package query

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse: reading any body ends, without a panic, in a Result or an
// error matching ErrNotJSON; a Result's degraded reasons are set exactly
// when it has some, and Complete never holds with errors.
func FuzzParse(f *testing.F) {
	for _, b := range []string{okBody, errorsBody, degradedBody, illegalBody, doomedBody, "", "{}", `{"root":null}`, `{"root":{"coverage":{"degraded":{}}}}`, "<html>"} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Result
		err := parse(body, &r)
		if err != nil {
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("parse(%q) = %v, want ErrNotJSON", body, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("parse(%q) read a body that is not JSON", body)
		}
		if d := r.Coverage.Degraded; d != nil && len(d.Reasons()) == 0 {
			t.Fatalf("parse(%q): a degraded coverage with no reason", body)
		}
		if r.Complete() && len(r.Errors) > 0 {
			t.Fatalf("parse(%q): complete with errors", body)
		}
	})
}
