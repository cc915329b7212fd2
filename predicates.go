package retries

import (
	"fmt"
	"reflect"
	"strings"
)

// Predicate decides which outcomes of an attempt a [Policy] retries. An
// outcome is the attempt's value (in [DoValue]; Do has none) and its error.
// Error predicates never match a nil error; value predicates such as
// [RetryIfValue] and [RetryIfStatus] look at the value of an attempt that
// succeeded (RetryIfStatus also reads a [*StatusError] in the error).
//
// Whatever the predicate says, Do never retries once the caller's context is
// done, and never retries an error wrapped by [Permanent] (or backoff's Permanent).
//
// Predicates are immutable values built by the Retry… functions and are safe
// to share. The zero Predicate retries any non-nil error, as
// [RetryIfAnyError] does.
type Predicate struct {
	p predicate
}

type predicate interface {
	match(v any, err error) bool
	// onValue reports whether match can be true for a nil error, so that the
	// executor must box the value of a successful attempt to ask.
	onValue() bool
	String() string
}

// Match reports whether the predicate retries an attempt that returned v and
// err.
func (p Predicate) Match(v any, err error) bool {
	return p.match(v, err)
}

func (p Predicate) match(v any, err error) bool {
	if p.p == nil {
		return err != nil
	}
	return p.p.match(v, err)
}

func (p Predicate) onValue() bool { return p.p != nil && p.p.onValue() }

// String describes the predicate, as in "RetryIfStatus(429)".
func (p Predicate) String() string {
	if p.p == nil {
		return "RetryIfAnyError()"
	}
	return p.p.String()
}

// RetryIfAnyError retries every non-nil error. It equals the zero Predicate
// and is what tenacity retries by default. Unlike tenacity under pyvespa, it
// does not retry an error that comes from the caller's own context ending:
// Do never retries once that context is done.
func RetryIfAnyError() Predicate { return Predicate{} }

// RetryIfError retries a non-nil error for which f reports true, for example
// RetryIfError(IsConnectionError).
//
// RetryIfError panics if f is nil.
func RetryIfError(f func(error) bool) Predicate {
	if f == nil {
		panic("retries: RetryIfError(nil)")
	}
	return Predicate{errFunc{f: &f}}
}

type errFunc struct {
	f *func(error) bool // a pointer keeps the struct comparable
}

func (p errFunc) match(_ any, err error) bool { return err != nil && (*p.f)(err) }
func (errFunc) onValue() bool                 { return false }
func (p errFunc) String() string              { return "RetryIfError(" + funcName(*p.f) + ")" }

// RetryIfErrorIs retries an error that matches any of targets as
// [errors.Is] would match it, looking through at most 100 wrapped errors so
// that a cycle cannot make it spin.
//
// RetryIfErrorIs panics if it is given no target or a nil one.
func RetryIfErrorIs(targets ...error) Predicate {
	if len(targets) == 0 {
		panic("retries: RetryIfErrorIs needs at least one target")
	}
	for _, t := range targets {
		if t == nil {
			panic("retries: RetryIfErrorIs: nil target")
		}
	}
	return Predicate{&errIs{targets: append([]error(nil), targets...)}}
}

type errIs struct{ targets []error }

func (p *errIs) match(_ any, err error) bool {
	if err == nil {
		return false
	}
	for _, t := range p.targets {
		if inTree(err, t) {
			return true
		}
	}
	return false
}
func (*errIs) onValue() bool { return false }
func (p *errIs) String() string {
	parts := make([]string, len(p.targets))
	for i, t := range p.targets {
		parts[i] = fmt.Sprintf("%q", t.Error())
	}
	return "RetryIfErrorIs(" + strings.Join(parts, ", ") + ")"
}

// RetryIfErrorAs retries an error whose chain holds an error of type E, as
// reported by [errors.As]: RetryIfErrorAs[*StatusError]() is how [Visit]
// retries HTTP status errors.
func RetryIfErrorAs[E error]() Predicate {
	return Predicate{errAs[E]{}}
}

type errAs[E error] struct{}

func (errAs[E]) match(_ any, err error) bool {
	return isIn[E](err)
}

// isErrorAs reports whether errors.As would stop at err for a target of
// type E: err is an E, or its As method says so. Only the As call needs a
// target, so a plain chain is walked without allocating.
func isErrorAs[E error](err error) bool {
	if _, ok := err.(E); ok {
		return true
	}
	if as, ok := err.(interface{ As(any) bool }); ok {
		var target E
		return as.As(&target)
	}
	return false
}
func (errAs[E]) onValue() bool { return false }
func (errAs[E]) String() string {
	return "RetryIfErrorAs[" + reflect.TypeFor[E]().String() + "]()"
}

// RetryIfValue retries a successful attempt whose value makes f report true
// (tenacity's retry_if_result). It never retries an error. In [Policy.Do],
// which has no value, f sees nil.
//
// RetryIfValue panics if f is nil.
func RetryIfValue(f func(v any) bool) Predicate {
	if f == nil {
		panic("retries: RetryIfValue(nil)")
	}
	return Predicate{valueFunc{f: &f}}
}

type valueFunc struct {
	f *func(any) bool
}

func (p valueFunc) match(v any, err error) bool { return err == nil && (*p.f)(v) }
func (valueFunc) onValue() bool                 { return true }
func (p valueFunc) String() string              { return "RetryIfValue(" + funcName(*p.f) + ")" }

// RetryAny retries an outcome that any of preds retries, checked in order.
// With no predicates it retries nothing.
func RetryAny(preds ...Predicate) Predicate {
	return Predicate{&predList{any: true, parts: append([]Predicate(nil), preds...)}}
}

// RetryAll retries an outcome that every one of preds retries, checked in
// order. With no predicates it retries everything, successes included.
func RetryAll(preds ...Predicate) Predicate {
	return Predicate{&predList{any: false, parts: append([]Predicate(nil), preds...)}}
}

type predList struct {
	any   bool
	parts []Predicate
}

func (l *predList) match(v any, err error) bool {
	for _, p := range l.parts {
		if p.match(v, err) == l.any {
			return l.any
		}
	}
	return !l.any
}

func (l *predList) onValue() bool {
	if !l.any && len(l.parts) == 0 {
		return true
	}
	for _, p := range l.parts {
		if p.onValue() {
			return true
		}
	}
	return false
}

func (l *predList) String() string {
	name := "RetryAll"
	if l.any {
		name = "RetryAny"
	}
	return name + "(" + joinStrings(l.parts) + ")"
}

// RetryNot retries exactly the outcomes that p does not, successes included:
// RetryNot(RetryIfErrorIs(ErrDone)) keeps calling until ErrDone comes back
// (tenacity's retry_unless_exception_type).
func RetryNot(p Predicate) Predicate { return Predicate{notPred{p: p}} }

type notPred struct{ p Predicate }

func (n notPred) match(v any, err error) bool { return !n.p.match(v, err) }
func (notPred) onValue() bool                 { return true }
func (n notPred) String() string              { return "RetryNot(" + n.p.String() + ")" }
