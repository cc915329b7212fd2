package retries

import (
	"reflect"
	"strings"

	"github.com/cenkalti/backoff/v4"
)

// Permanent wraps err so that Do returns err at once, unwrapped, whatever
// the policy's predicate says. It returns nil for a nil err. It wraps err in
// backoff v4's [backoff.PermanentError], so code that already uses
// backoff.Permanent works unchanged; Do also recognises the PermanentError
// of backoff's later majors (v5 and up), whose type differs, so permanent
// errors from code written for them are not retried either.
//
// Do looks for a permanent error through at most 100 wrapped errors, so an
// error whose Unwrap returns itself, or a cycle of wrapped errors, cannot
// make it spin; so do this package's predicates, [IsConnectionError] and
// the methods of [RetryError]. A predicate of your own built on
// [errors.Is] or [errors.As] has no such bound and would spin on such an
// error.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return backoff.Permanent(err)
}

// findPermanent returns the error wrapped by the first permanent error in
// err's tree (backoff v4's *PermanentError, or that of a later major), and
// whether there was one.
func findPermanent(err error) (error, bool) {
	switch pe := findInTree(err, isPermanent).(type) {
	case nil:
		return nil, false
	case *backoff.PermanentError:
		return pe.Err, true
	case interface{ Unwrap() error }:
		return pe.Unwrap(), true
	}
	return nil, false
}

// isPermanent reports whether err is a permanent error of backoff v4 or of
// a later major.
func isPermanent(err error) bool {
	if _, ok := err.(*backoff.PermanentError); ok {
		return true
	}
	_, ok := err.(interface{ Unwrap() error })
	return ok && isLaterBackoffPermanent(err)
}

// isLaterBackoffPermanent reports whether err is a *PermanentError of
// github.com/cenkalti/backoff/v5 or a later major, recognised by its type's
// name and package so that this package need not depend on them.
func isLaterBackoffPermanent(err error) bool {
	t := reflect.TypeOf(err)
	if t.Kind() != reflect.Pointer || t.Elem().Name() != "PermanentError" {
		return false
	}
	pkg, ok := strings.CutPrefix(t.Elem().PkgPath(), "github.com/cenkalti/backoff/v")
	return ok && pkg != "" && pkg != "4" && isDigits(pkg)
}
