package visit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seed32e55400/retries/internal/updates"
)

// Process is what the server does to each document a visit selects, as it
// visits it: document/v1's delete and update by selection. Each request
// processes its slice for a time chunk and answers how many documents it
// processed and where to go on; a Visit then hands out pages with no
// documents and their Processed counts, and the progress to resume from.
//
// A request that fails (a 500, a 504 with no bucket visited, a cut
// connection, a 429, a 503) has processed part of its chunk, or none, and
// says nothing of where: it is asked again from the slice's last token, as
// a page of a visit is. A delete, and an update that only assigns or
// removes, are safe to apply twice (SafeToRepeat). An update that is not
// (an increment, a decrement, a multiplication, a division, an add to a
// collection, a tensor's modify) would be applied twice to the documents the failed request had reached, so
// New refuses it without a Marker: with one, each document updated is
// marked with Run, and the visit selects only documents not so marked,
// which a request asked again, or a run resumed, skips.
type Process struct {
	// Update, if not nil, is the update applied to each document (a JSON
	// object with "fields", as a feed's update has), through a PUT; nil:
	// each document is removed, through a DELETE.
	Update json.RawMessage
	// Namespace and DocumentType are those of the documents processed: a
	// delete goes to /document/v1/ without them (every type the selection
	// matches), an update needs them.
	Namespace, DocumentType string
	// TimeChunk is how long the server processes a request before it
	// answers; 0: 30 s, or a third of the Config's MaxOutage if less, so
	// that a request in progress is not taken for an outage.
	TimeChunk time.Duration
	// Marker is a string field of DocumentType, an attribute in the
	// schema, and Run a value of it unique to this run: the visit's
	// selection becomes "(Selection) and DocumentType.Marker != Run", and
	// the update also assigns Run to Marker. Required for an update that
	// is not safe to repeat; a run resumed keeps its Run.
	Marker, Run string
}

// ErrUnsafeUpdate is why New refuses a Process whose update is not safe to
// apply twice without a Marker.
var ErrUnsafeUpdate = errors.New("visit: the update is not safe to apply twice (an increment, a decrement, a multiplication, a division, an add or a modify): give it a marker field")

// SafeToRepeat reports whether update (an object with "fields") only
// assigns or removes (a match by its own operation), so that applying it
// twice to a document is as once: the rule by which feed.Operation's
// SafeToRepeat judges an update of a feed. An error says why update is not
// an update (not an object with "fields", or an operation Vespa does not
// have).
func SafeToRepeat(update json.RawMessage) (bool, error) {
	var u struct {
		Fields json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(update, &u); err != nil || u.Fields == nil {
		return false, fmt.Errorf(`visit: the update is not a JSON object with "fields": %s`, firstLine(update))
	}
	repeats, err := updates.Repeats(u.Fields)
	if err != nil {
		return false, fmt.Errorf("visit: %v", err)
	}
	return !repeats, nil
}

// firstLine returns the start of b, for a message.
func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// processing is a Process made ready for requests.
type processing struct {
	method    string // DELETE or PUT
	path      string // /document/v1/ or /document/v1/NS/TYPE/docid/
	body      []byte // the update, with the marker's assignment
	selection string // the Config's, less what the marker says is done
	timeChunk string // the timeChunk parameter
}

// Selection returns what a run of p selects of the documents selection
// matches: with a Marker, those not yet marked with Run; selection itself
// otherwise. A visit of it after the run (ids only) counts what is left.
func (p *Process) Selection(selection string) string {
	if p.Marker == "" {
		return selection
	}
	return "(" + selection + ") and " + p.DocumentType + "." + p.Marker + ` != "` + p.Run + `"`
}

// standsAlone checks that a document selection is one expression in
// itself: its parentheses balanced outside its string literals (in double
// or single quotes, with backslash escapes), and every literal closed, so
// that "(S) and …" holds S whole. A selection such as "true) or (true"
// would otherwise escape the condition joined to it.
func standsAlone(selection string) error {
	depth := 0
	var quote byte
	for i := 0; i < len(selection); i++ {
		c := selection[i]
		switch {
		case quote != 0 && c == '\\':
			i++ // the escaped byte
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '"' || c == '\'':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				return fmt.Errorf("closes a parenthesis it did not open (at byte %d)", i)
			}
		}
	}
	switch {
	case quote != 0:
		return fmt.Errorf("leaves a string open (%c)", quote)
	case depth > 0:
		return fmt.Errorf("leaves %d parentheses open", depth)
	}
	return nil
}

// prepare checks p and returns it ready for requests of cfg's visit.
func (p *Process) prepare(cfg Config) (*processing, error) {
	chunk := p.TimeChunk
	if chunk <= 0 {
		chunk = 30 * time.Second
		if cfg.MaxOutage > 0 {
			chunk = min(chunk, cfg.MaxOutage/3)
		}
	}
	pr := &processing{method: "DELETE", path: "/document/v1/", selection: p.Selection(cfg.Selection),
		timeChunk: strconv.FormatFloat(chunk.Seconds(), 'f', -1, 64) + "s"}
	if (p.Namespace == "") != (p.DocumentType == "") {
		return nil, errors.New("visit: Process needs both Namespace and DocumentType, or neither")
	}
	if p.DocumentType != "" {
		pr.path = "/document/v1/" + url.PathEscape(p.Namespace) + "/" + url.PathEscape(p.DocumentType) + "/docid/"
	}
	switch {
	case cfg.Selection == "":
		return nil, errors.New("visit: Process needs a Selection (\"true\" for every document)")
	case cfg.FieldSet != "":
		return nil, errors.New("visit: Process takes no FieldSet (the handler refuses one)")
	}
	if p.Marker != "" && (p.Run == "" || p.DocumentType == "" || strings.ContainsAny(p.Run, `"\`)) {
		return nil, errors.New("visit: a Marker needs a DocumentType and a Run without quotes or backslashes")
	}
	if p.Marker != "" {
		if err := standsAlone(cfg.Selection); err != nil {
			return nil, fmt.Errorf("visit: the selection %s, so the marker's condition cannot be joined to it", err)
		}
	}
	if p.Update == nil {
		if p.Marker != "" {
			return nil, errors.New("visit: a Marker is for an update; a delete is safe to repeat")
		}
		return pr, nil
	}
	if p.DocumentType == "" {
		return nil, errors.New("visit: an update needs a Namespace and a DocumentType")
	}
	safe, err := SafeToRepeat(p.Update)
	switch {
	case err != nil:
		return nil, err
	case !safe && p.Marker == "":
		return nil, ErrUnsafeUpdate
	}
	pr.method, pr.body = "PUT", p.Update
	if p.Marker != "" {
		var u map[string]json.RawMessage
		_ = json.Unmarshal(p.Update, &u) // checked by SafeToRepeat
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(u["fields"], &fields)
		if _, ok := fields[p.Marker]; ok {
			return nil, fmt.Errorf("visit: the update sets the marker field %q itself", p.Marker)
		}
		fields[p.Marker], _ = json.Marshal(map[string]string{"assign": p.Run})
		u["fields"], _ = json.Marshal(fields)
		pr.body, _ = json.Marshal(u)
	}
	return pr, nil
}
