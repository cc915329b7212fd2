package retries

// Helpers shared by the files of the package.

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"time"
)

// stateless is embedded by the waits that keep no state for one call
// (start returns nil, so the wait serves every call itself) and by the
// stops; usesClock reports false unless the embedder defines its own.
type stateless struct{}

func (stateless) usesClock() bool { return false }
func (stateless) start() waiter   { return nil }

// addSat adds two durations, saturating at the ends of Duration's range.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	if (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return maxWait
	}
	return math.MinInt64
}

// checkNonNegative panics with a retries: message naming fn and the
// parameter when d is negative.
func checkNonNegative(fn, name string, d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("retries: %s: negative %s %v", fn, name, d))
	}
}

// funcName names a function for String methods: "retries.IsConnectionError"
// for a package-level function, "pkg.Outer.func1" for a closure.
func funcName(f any) string {
	rf := runtime.FuncForPC(reflect.ValueOf(f).Pointer())
	if rf == nil {
		return "func"
	}
	name := rf.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// isNil reports whether v holds a nil pointer, map, slice, func,
// interface or channel.
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// describeValue names a retried value in an error message without printing
// it (a value may hold secrets): its type, and its status when it has one.
func describeValue(v any) string {
	if code, ok := statusOf(v, nil); ok {
		return fmt.Sprintf("%T with status %d", v, code)
	}
	return fmt.Sprintf("%T", v)
}

// joinStrings joins the String of each part with ", ".
func joinStrings[T fmt.Stringer](parts []T) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// isTimeout reports whether the first error in err's tree with a Timeout
// method reports a timeout.
func isTimeout(err error) bool {
	t, ok := asInTree[interface{ Timeout() bool }](err)
	return ok && t.Timeout()
}
