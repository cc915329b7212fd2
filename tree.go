package retries

import "reflect"

// maxUnwrap bounds the walk of an error's tree: an error whose Unwrap
// returns itself, or a cycle, would otherwise make a retried call, or the
// printing of its error, spin for ever. errors.Is and errors.As have no
// such bound, so everything in this package that looks inside an error it
// was handed walks with findInTree, inTree or asInTree instead.
const maxUnwrap = 100

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

// inTree reports what errors.Is(err, target) reports, within the walk's
// bound: an error in err's tree equals target, or its Is method says so.
func inTree(err, target error) bool {
	if err == nil || target == nil {
		return err == target
	}
	comparable := reflect.TypeOf(target).Comparable()
	return findInTree(err, func(e error) bool {
		if comparable && e == target {
			return true
		}
		is, ok := e.(interface{ Is(error) bool })
		return ok && is.Is(target)
	}) != nil
}

// asInTree returns what errors.As would set a target of type E to, and
// whether it found one, within the walk's bound.
func asInTree[E any](err error) (E, bool) {
	var found E
	ok := findInTree(err, func(e error) bool {
		if t, ok := e.(E); ok {
			found = t
			return true
		}
		as, ok := e.(interface{ As(any) bool })
		return ok && as.As(&found)
	}) != nil
	return found, ok
}

// isIn reports whether err's tree holds an error of type E, as errors.As
// would find it.
func isIn[E error](err error) bool { return findInTree(err, isErrorAs[E]) != nil }
