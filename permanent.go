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
// make it spin. Predicates built on [errors.Is] and [errors.As], such as
// [RetryIfErrorIs], have no such bound and would spin on such an error.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return backoff.Permanent(err)
}

// maxUnwrap bounds the walk of an error's tree in findPermanent: an error
// whose Unwrap returns itself, or a cycle, would otherwise make every
// retried call spin for ever. errors.Is and errors.As have no such bound,
// so predicates built on them still spin on such an error.
const maxUnwrap = 100

// findPermanent returns the error wrapped by the first permanent error in
// err's tree (backoff v4's *PermanentError, or that of a later major), and
// whether there was one. It walks at most maxUnwrap errors, depth first, and
// avoids errors.As, which would allocate its target.
func findPermanent(err error) (error, bool) {
	budget := maxUnwrap
	return walkPermanent(err, &budget)
}

func walkPermanent(err error, budget *int) (error, bool) {
	for err != nil {
		if *budget--; *budget < 0 {
			return nil, false
		}
		switch e := err.(type) {
		case *backoff.PermanentError:
			return e.Err, true
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if pe, ok := walkPermanent(inner, budget); ok {
					return pe, true
				}
			}
			return nil, false
		case interface{ Unwrap() error }:
			if isLaterBackoffPermanent(err) {
				return e.Unwrap(), true
			}
			err = e.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
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
