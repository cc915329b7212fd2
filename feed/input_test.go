package feed

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// readResult is one thing opReader.next returned, written as a test
// expects it: "put /document/v1/… {…} @3" for an operation starting on line
// 3, "bad @3: …" for a *OperationError, "stop @3: …" for an *InputError (the line
// it names as not read), "error: …" for any other error.
func readResult(op *operation, err error) string {
	var bad *OperationError
	var stop *InputError
	switch {
	case op != nil:
		if op.body == nil {
			return fmt.Sprintf("%s %s @%d", op.kind, op.path, op.line)
		}
		return fmt.Sprintf("%s %s %s @%d", op.kind, op.path, op.body, op.line)
	case errors.As(err, &bad):
		return fmt.Sprintf("bad @%d: %v", bad.Line, bad.Err)
	case errors.As(err, &stop):
		return fmt.Sprintf("stop @%d: %v", stop.from.line, stop)
	}
	return fmt.Sprintf("error: %v", err)
}

// readAllResults reads r to its end, io.EOF not included.
func readAllResults(t *testing.T, in io.Reader) []string {
	t.Helper()
	r := newOpReader(in)
	var got []string
	for range 1000 {
		op, err := r.next()
		if err == io.EOF {
			return got
		}
		got = append(got, readResult(op, err))
		var stop *InputError
		if errors.As(err, &stop) {
			if op, err := r.next(); op != nil || !errors.As(err, &stop) {
				t.Errorf("after %v, next() = %v, %v, want the same error again", stop, op, err)
			}
			return got
		}
	}
	t.Fatal("the reader did not end")
	return nil
}

// checkResults compares the results with want, where each wanted line is
// a prefix, or for errors a prefix followed by "…" and a substring.
func checkResults(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		prefix, sub, _ := strings.Cut(want[i], "…")
		ok = strings.HasPrefix(got[i], prefix) && strings.Contains(got[i][len(prefix):], sub)
	}
	if !ok {
		t.Errorf("read\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

const (
	put1 = `{"put": "id:a:b::1", "fields": {"x": 1}}`
	put2 = `{"put": "id:a:b::2", "fields": {"x": 2}}`
)

// TestReadKeys: top-level keys match exactly, once each, so that no
// spelling or repetition of "condition" sends a conditional write without
// its condition.
func TestReadKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     string
	}{
		{"duplicate_condition", `{"update": "id:a:b::1", "condition": "doc.a==1", "condition": "", "fields": {"n": {"increment": 1}}}`,
			`bad @1: invalid operation: duplicate key "condition"`},
		{"duplicate_condition_same", `{"remove": "id:a:b::1", "condition": "doc.a==1", "condition": "doc.a==1"}`,
			`bad @1: invalid operation: duplicate key "condition"`},
		{"duplicate_put", `{"put": "id:a:b::1", "put": "id:a:b::2", "fields": {}}`, `bad @1: invalid operation: duplicate key "put"`},
		{"duplicate_fields", `{"put": "id:a:b::1", "fields": {"x": 1}, "fields": {}}`, `bad @1: invalid operation: duplicate key "fields"`},
		{"duplicate_create", `{"update": "id:a:b::1", "create": true, "create": false, "fields": {}}`, `bad @1: invalid operation: duplicate key "create"`},
		{"duplicate_by_escape", `{"remove": "id:a:b::1", "condition": "doc.a==1", "c\u006fndition": ""}`, `bad @1: invalid operation: duplicate key "condition"`},
		{"Put", `{"Put": "id:a:b::1", "fields": {}}`, `bad @1: invalid operation: unknown key "Put" (keys are case-sensitive: "put")`},
		{"FIELDS", `{"put": "id:a:b::1", "FIELDS": {}}`, `bad @1: invalid operation: unknown key "FIELDS" (keys are case-sensitive: "fields")`},
		{"cReAtE", `{"update": "id:a:b::1", "cReAtE": true, "fields": {}}`, `bad @1: invalid operation: unknown key "cReAtE" (keys are case-sensitive: "create")`},
		{"Condition", `{"remove": "id:a:b::1", "Condition": "doc.a==1"}`, `bad @1: invalid operation: unknown key "Condition" (keys are case-sensitive: "condition")`},
		{"long_s", `{"put": "id:a:b::1", "fieldſ": {}}`, `bad @1: invalid operation: unknown key "fieldſ" (keys are case-sensitive: "fields")`},
		{"misspelt", `{"remove": "id:a:b::1", "condtion": "doc.a==1"}`, `bad @1: invalid operation: unknown key "condtion"`},
		{"escaped_key", `{"\u0070ut": "id:a:b::1", "fields": {}}`, `put /document/v1/a/b/docid/1 {"fields":{}} @1`},
		{"condition_null", `{"remove": "id:a:b::1", "condition": null}`, `bad @1: invalid operation: "condition" is not a string`},
		{"condition_number", `{"remove": "id:a:b::1", "condition": 1}`, `bad @1: invalid operation: "condition" is not a string`},
		{"create_string", `{"update": "id:a:b::1", "create": "true", "fields": {}}`, `bad @1: invalid operation: "create" is not true or false`},
		{"id_number", `{"put": 1, "fields": {}}`, `bad @1: invalid operation: "put" is not a string`},
		{"fields_null", `{"remove": "id:a:b::1", "fields": null}`, `remove /document/v1/a/b/docid/1 @1`},
		{"fields_string", `{"put": "id:a:b::1", "fields": "x"}`, `bad @1: invalid operation: "fields" is not an object`},
		{"put_and_id", `{"put": "id:a:b::1", "id": "id:a:b::1", "fields": {}}`, `bad @1: invalid operation: want exactly one of`},
		{"no_kind", `{"fields": {}}`, `bad @1: invalid operation: want exactly one of`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResults(t, readAllResults(t, strings.NewReader(tc.in)), []string{tc.want})
		})
	}
}

// TestReadPutForms: Vespa's legacy "id" key is a put, and a put takes
// "create" (a conditional put that creates, since Vespa 8.178).
func TestReadPutForms(t *testing.T) {
	t.Parallel()
	in := `{"id": "id:a:b::1", "fields": {"x": 1}}
{"put": "id:a:b::2", "create": true, "condition": "b.x==1", "fields": {}}
{"put": "id:a:b::3", "create": false, "fields": {}}
{"update": "id:a:b::4", "create": false, "fields": {}}
{"remove": "id:a:b::5", "create": false}
`
	checkResults(t, readAllResults(t, strings.NewReader(in)), []string{
		`put /document/v1/a/b/docid/1 {"fields":{"x": 1}} @1`,
		`put /document/v1/a/b/docid/2?condition=b.x%3D%3D1&create=true {"fields":{}} @2`,
		`put /document/v1/a/b/docid/3 {"fields":{}} @3`,
		`update /document/v1/a/b/docid/4 {"fields":{}} @4`,
		`bad @5: invalid operation: "create" is for a put or an update, not a remove`,
	})
}

// TestReadIDs: ids are valid Unicode, numbers are Vespa's signed 64-bit
// integers sent as Vespa sends them, and dot segments are escaped.
func TestReadIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, id, want string
	}{
		{"invalid_utf8", "id:a:b::\xff", `bad @1: invalid operation: invalid UTF-8`},
		{"invalid_utf8_in_fields", "id:a:b::1\", \"fields\": {\"x\": \"\xc3\"}, \"z\": \"", `bad @1: invalid operation: invalid UTF-8`},
		{"encoded_surrogate", "id:a:b::\xed\xa0\x80", `bad @1: invalid operation: invalid UTF-8`},
		{"lone_high_surrogate", `id:a:b::\ud800`, `bad @1: invalid operation: "remove": a lone UTF-16 surrogate`},
		{"lone_low_surrogate", `id:a:b::\udc00x`, `bad @1: invalid operation: "remove": a lone UTF-16 surrogate`},
		{"high_then_other", `id:a:b::\ud800\u0041`, `bad @1: invalid operation: "remove": a lone UTF-16 surrogate`},
		{"surrogate_pair", `id:a:b::\ud83d\ude00`, `remove /document/v1/a/b/docid/%F0%9F%98%80 @1`},
		{"escapes", `id:a:b::q\"\\\/\t`, `remove /document/v1/a/b/docid/q%22%5C%2F%09 @1`},
		{"dot", `id:a:b::.`, `remove /document/v1/a/b/docid/%2E @1`},
		{"dot_dot", `id:a:b::..`, `remove /document/v1/a/b/docid/%2E%2E @1`},
		{"dot_dot_group", `id:a:b:g=..:.`, `remove /document/v1/a/b/group/%2E%2E/%2E @1`},
		{"dot_namespace", `id:.:..::x`, `remove /document/v1/%2E/%2E%2E/docid/x @1`},
		{"three_dots", `id:a:b::...`, `remove /document/v1/a/b/docid/... @1`},
		{"number", `id:a:b:n=123:x`, `remove /document/v1/a/b/number/123/x @1`},
		{"number_plus", `id:a:b:n=+5:x`, `remove /document/v1/a/b/number/5/x @1`},
		{"number_zeros", `id:a:b:n=007:x`, `remove /document/v1/a/b/number/7/x @1`},
		{"number_minus_one", `id:a:b:n=-1:x`, `remove /document/v1/a/b/number/18446744073709551615/x @1`},
		{"number_min", `id:a:b:n=-9223372036854775808:x`, `remove /document/v1/a/b/number/9223372036854775808/x @1`},
		{"number_max", `id:a:b:n=9223372036854775807:x`, `remove /document/v1/a/b/number/9223372036854775807/x @1`},
		{"number_over", `id:a:b:n=9223372036854775808:x`, `bad @1: invalid operation: invalid document id … n= needs a signed 64-bit integer`},
		{"number_uint_max", `id:a:b:n=18446744073709551615:x`, `bad @1: invalid operation: invalid document id … n= needs a signed 64-bit integer`},
		{"number_empty", `id:a:b:n=:x`, `bad @1: invalid operation: invalid document id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"remove": "` + tc.id + `"}`
			checkResults(t, readAllResults(t, strings.NewReader(in)), []string{tc.want})
		})
	}
}

// multiLine is a feed of objects over several lines, with blank lines
// between them and a line inside one that is itself a complete operation.
const multiLine = `
{
  "put": "id:a:b::1",
  "fields": {"title": "one", "n": [1, 2,
     3]}
}

   {"update": "id:a:b::2",
    "create": true, "fields": {"n": {"assign": 2}}}
{"remove": "id:a:b::3"} {"remove": "id:a:b::4"}
{
  "put": "id:a:b::5",
  "fields": {"inner":
{"put": "id:a:b::6", "fields": {}}
  }
}
`

var multiLineWant = []string{
	"put /document/v1/a/b/docid/1 {\"fields\":{\"title\": \"one\", \"n\": [1, 2,\n     3]}} @2",
	`update /document/v1/a/b/docid/2?create=true {"fields":{"n": {"assign": 2}}} @8`,
	`remove /document/v1/a/b/docid/3 @10`,
	`remove /document/v1/a/b/docid/4 @10`,
	"put /document/v1/a/b/docid/5 {\"fields\":{\"inner\":\n{\"put\": \"id:a:b::6\", \"fields\": {}}\n  }} @11",
}

// TestReadFraming: a feed is a stream of objects, one a line or over
// several lines, or one array of them; an object is one operation,
// reported by the line it starts on, whatever its lines hold.
func TestReadFraming(t *testing.T) {
	t.Parallel()
	arrayOf := func(ops string) string {
		// Commas between the objects of multiLine, which start lines 2, 8,
		// 10 (twice) and 11.
		r := strings.NewReplacer("}\n\n   {", "},\n\n   {", "}}\n{\"remove\"", "}},\n{\"remove\"", `"} {`, `"}, {`, "\"}\n{\n", "\"},\n{\n")
		return "[" + r.Replace(ops) + "]"
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"json_lines_over_lines", multiLine, multiLineWant},
		{"array_over_lines", arrayOf(multiLine), multiLineWant},
		{"array_one_line", "[" + put1 + "," + put2 + "]", []string{`put /document/v1/a/b/docid/1 {"fields":{"x": 1}} @1`, `put /document/v1/a/b/docid/2 {"fields":{"x": 2}} @1`}},
		{"no_space_between", put1 + put2, []string{`put /document/v1/a/b/docid/1 {"fields":{"x": 1}} @1`, `put /document/v1/a/b/docid/2 {"fields":{"x": 2}} @1`}},
		{"empty", "", nil},
		{"only_space", " \n\t\r\n", nil},
		{"empty_array", " [ \n ] \n", nil},
		{"bom_lines", "\xEF\xBB\xBF" + put1 + "\n", []string{`put /document/v1/a/b/docid/1 {"fields":{"x": 1}} @1`}},
		{"bom_array", "\xEF\xBB\xBF[" + put1 + "]", []string{`put /document/v1/a/b/docid/1 {"fields":{"x": 1}} @1`}},
		{"bom_only", "\xEF\xBB\xBF", nil},
		{"bom_twice", "\xEF\xBB\xBF\xEF\xBB\xBF" + put1, []string{`stop @1: line 1: invalid JSON: byte 0xef where an operation`}},
		{"bom_later", put1 + "\n\xEF\xBB\xBF" + put2, []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: byte 0xef where an operation`}},
		{"after_array", "[" + put1 + "]\n" + put2, []string{`put /document/v1/a/b/docid/1`,
			`stop @2: line 2: invalid JSON: '{' after the end of the array; the input from line 2 on was not read`}},
		{"after_array_same_line", "[" + put1 + "] x", []string{`put /document/v1/a/b/docid/1`,
			`stop @1: line 1: invalid JSON: 'x' after the end of the array; the input from byte offset 43 (on line 1) on was not read`}},
		{"second_array", "[" + put1 + "]\n[" + put2 + "]", []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: '[' after the end of the array`}},
		{"trailing_comma", "[" + put1 + ",\n]", []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: ']' after ','`}},
		{"missing_comma", "[" + put1 + "\n" + put2 + "]", []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: '{' after an operation in the array: want ',' or ']'`}},
		{"unterminated_array", "[" + put1 + ",\n" + put2, []string{`put /document/v1/a/b/docid/1`, `put /document/v1/a/b/docid/2`, `stop @2: line 2: invalid JSON: unexpected end of input in the array`}},
		{"not_an_object", put1 + "\n42\n" + put2, []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: '4' where an operation (a JSON object) should start`}},
		{"array_of_numbers", "[1]", []string{`stop @1: line 1: invalid JSON: '1' where an operation (a JSON object) should start`}},
		{"text", "put id:a:b::1", []string{`stop @1: line 1: invalid JSON: 'p' where an operation`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResults(t, readAllResults(t, strings.NewReader(tc.in)), tc.want)
			// The same, one byte at a time: where reads end changes nothing.
			checkResults(t, readAllResults(t, iotest.OneByteReader(strings.NewReader(tc.in))), tc.want)
		})
	}
}

// TestReadSyntaxError: broken JSON stops the reading at the start of the
// broken value, and nothing of it or after it is sent: not even a line
// inside it that is a complete operation of its own.
func TestReadSyntaxError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"truncated_line", put1 + "\n" + `{"put": "id:a:b::2", "fields": {"x": 2}` + "\n" + put2 + "\n",
			[]string{`put /document/v1/a/b/docid/1`, `stop @2: line 3: invalid JSON: '{' after a value: want ',' or '}' (in the operation from line 2); the input from line 2 on was not read`}},
		{"unterminated_string_over_lines", put1 + "\n" + `{"put": "id:a:b::2", "fields": {"x": "open` + "\n" + put2 + "\n",
			[]string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: a line break inside a string; the input from line 2 on was not read`}},
		{"broken_outer_complete_inner", "{\"put\": \"id:a:b::1\", \"fields\": {\"x\":\n" + put2 + "\n,]}\n" + put1,
			[]string{`stop @1: line 3: invalid JSON: ']' where an object key should start (in the operation from line 1); the input from line 1 on was not read`}},
		{"second_on_line", put1 + ` {"put": x}`, []string{`put /document/v1/a/b/docid/1`,
			`stop @1: line 1: invalid JSON: 'x' where a value should start; the input from byte offset 41 (on line 1) on was not read`}},
		{"end_of_input", put1 + "\n" + `{"remove": "id:a:b::2"`, []string{`put /document/v1/a/b/docid/1`, `stop @2: line 2: invalid JSON: unexpected end of input inside an operation`}},
		{"bad_escape", `{"remove": "id:a:b::\x"}`, []string{`stop @1: line 1: invalid JSON: invalid escape '\x' in a string`}},
		{"short_unicode", `{"remove": "id:a:b::\u12"}`, []string{`stop @1: line 1: invalid JSON: '"' in a \u escape: want a hex digit`}},
		{"tab_in_string", "{\"remove\": \"id:a:b::\t\"}", []string{`stop @1: line 1: invalid JSON: control character 0x09 inside a string`}},
		{"leading_zero", `{"put": "id:a:b::1", "fields": {"x": 01}}`, []string{`stop @1: line 1: invalid JSON: '1' after a value`}},
		{"bare_minus", `{"put": "id:a:b::1", "fields": {"x": -}}`, []string{`stop @1: line 1: invalid JSON: '}' in a number`}},
		{"dot_no_digit", `{"put": "id:a:b::1", "fields": {"x": 1.}}`, []string{`stop @1: line 1: invalid JSON: '}' in a number`}},
		{"exponent_no_digit", `{"put": "id:a:b::1", "fields": {"x": 1e+}}`, []string{`stop @1: line 1: invalid JSON: '}' in a number`}},
		{"bad_literal", `{"put": "id:a:b::1", "fields": {"x": nul}}`, []string{`stop @1: line 1: invalid JSON: '}' in a literal`}},
		{"single_quotes", `{'put': "id:a:b::1"}`, []string{`stop @1: line 1: invalid JSON: ''' where an object key should start`}},
		{"trailing_comma_object", `{"remove": "id:a:b::1",}`, []string{`stop @1: line 1: invalid JSON: '}' where an object key should start`}},
		{"missing_colon", `{"remove" "id:a:b::1"}`, []string{`stop @1: line 1: invalid JSON: '"' after an object key: want ':'`}},
		{"mismatched_close", `{"put": "id:a:b::1", "fields": {"x": [1}}`, []string{`stop @1: line 1: invalid JSON: '}' after a value: want ',' or ']'`}},
		{"too_deep", `{"put": "id:a:b::1", "fields": {"x": ` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + "}}",
			[]string{`stop @1: line 1: invalid JSON: nested deeper than 10000`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResults(t, readAllResults(t, strings.NewReader(tc.in)), tc.want)
			checkResults(t, readAllResults(t, iotest.OneByteReader(strings.NewReader(tc.in))), tc.want)
		})
	}
}

// TestReadValid: well-formed JSON of every kind is read, and the fields go
// out byte for byte as written.
func TestReadValid(t *testing.T) {
	t.Parallel()
	fields := `{"s": "a\"b\\c\/\b\f\n\r\t\u00e9\ud83d\ude00", "n": [0, -0, 1.5, -2e10, 3E-7, 1e+2, 18446744073709551615, 123456789012345678901234567890],` +
		` "l": [true, false, null], "o": {}, "a": [], "deep": [[{"k": [{}]}]], "ws": { "k" : [ 1 , 2 ] } }`
	in := `{"put": "id:a:b::1", "fields": ` + fields + `}`
	checkResults(t, readAllResults(t, strings.NewReader(in)), []string{`put /document/v1/a/b/docid/1 {"fields":` + fields + `} @1`})
	deep := `{"put": "id:a:b::1", "fields": {"x": ` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + "}}"
	if got := readAllResults(t, strings.NewReader(deep)); len(got) != 1 || !strings.HasPrefix(got[0], "put ") {
		t.Errorf("nesting of %d levels: read %.80q, want one put", maxDepth, got)
	}
}

// TestReadTooLarge: an operation over maxOpBytes is reported and skipped,
// and the feed goes on.
func TestReadTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"put": "id:a:b::big", "fields": {"x": "` + strings.Repeat("y", maxOpBytes) + `"}}`
	in := put1 + "\n" + big + "\n" + put2 + "\n"
	checkResults(t, readAllResults(t, strings.NewReader(in)), []string{
		`put /document/v1/a/b/docid/1`,
		`bad @2: operation larger than 64 MiB`,
		`put /document/v1/a/b/docid/2`,
	})
}

// TestReadError: a failing read stops the feed and names where.
func TestReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	in := io.MultiReader(strings.NewReader(put1+"\n"+`{"remove":`), iotest.ErrReader(boom))
	r := newOpReader(in)
	if op, err := r.next(); op == nil {
		t.Fatalf("next() = %v", err)
	}
	_, err := r.next()
	var stop *InputError
	if !errors.As(err, &stop) || !errors.Is(err, boom) || stop.from.line != 2 {
		t.Errorf("next() = %v, want an *InputError wrapping boom from line 2", err)
	}
}

// TestFeedSendsIDsAsVespaDoes checks what reaches a real server: dot
// segments escaped, numbers in Vespa's form, a byte order mark ignored,
// multi-line objects sent once each.
func TestFeedSendsIDsAsVespaDoes(t *testing.T) {
	t.Parallel()
	var mu = make(chan struct{}, 1)
	var uris []string
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		mu <- struct{}{}
		uris = append(uris, r.Method+" "+r.RequestURI)
		<-mu
		return 0
	})
	in := "\xEF\xBB\xBF" + `{"remove": "id:a:b::."}
{"remove": "id:a:b::.."}
{"remove": "id:a:b:n=-1:x"}
{"remove": "id:a:b:n=+5:y"}` + multiLine
	cfg := testFeedConfig(srv.URL, nil)
	cfg.Concurrency = 1
	res, sum, stderr := runTestFeed(t, t.Context(), cfg, in)
	want := []string{
		"DELETE /document/v1/a/b/docid/%2E",
		"DELETE /document/v1/a/b/docid/%2E%2E",
		"DELETE /document/v1/a/b/number/18446744073709551615/x",
		"DELETE /document/v1/a/b/number/5/y",
		"POST /document/v1/a/b/docid/1",
		"PUT /document/v1/a/b/docid/2?create=true",
		"DELETE /document/v1/a/b/docid/3",
		"DELETE /document/v1/a/b/docid/4",
		"POST /document/v1/a/b/docid/5",
	}
	if !slices.Equal(uris, want) {
		t.Errorf("server saw\n\t%s\nwant\n\t%s", strings.Join(uris, "\n\t"), strings.Join(want, "\n\t"))
	}
	if res.failed != 0 || sum["feeder.ok.count"] != 9.0 || stderr != "" {
		t.Errorf("failed %d, summary ok %v, stderr %q; want 0, 9, nothing", res.failed, sum["feeder.ok.count"], stderr)
	}
}
