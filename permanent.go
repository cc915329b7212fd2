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

// maxUnwrap bounds the walk of an error's tree in findInTree: an error
// whose Unwrap returns itself, or a cycle, would otherwise make every
// retried call spin for ever. errors.Is and errors.As have no such bound,
// so predicates built on them still spin on such an error.
const maxUnwrap = 100

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

// findInTree returns the first error in err's tree that match accepts,
// depth first as errors.As visits them, or nil. It walks at most maxUnwrap
// errors, so that a cycle cannot make it spin, and allocates nothing (where
// errors.As allocates its target) unless match does.
func findInTree(err error, match func(error) bool) error {
	budget := maxUnwrap
	return walkTree(err, match, &budget)
}

func walkTree(err error, match func(error) bool, budget *int) error {
	for err != nil {
		if *budget--; *budget < 0 {
			return nil
		}
		if match(err) {
			return err
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if found := walkTree(inner, match, budget); found != nil {
					return found
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
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
