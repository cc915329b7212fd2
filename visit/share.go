package visit

import (
	"fmt"
	"strconv"
	"strings"
)

// Share is the part of a visit that one process takes when the visit is
// split across processes (a Kubernetes Indexed Job, say): of the visit's
// Config.Slices, those whose id is Index modulo Of. Every process gives
// the same Slices, so that continuation tokens stay valid whichever
// process resumes a share, and a share's Progress holds the other shares'
// slices as done: they are not its to visit. The zero Share is the whole
// visit.
type Share struct {
	Index, Of int
}

// ParseShare reads a share written as I/W, such as 0/3: W at least 1, I
// from 0 to W-1.
func ParseShare(s string) (Share, error) {
	i, w, ok := strings.Cut(s, "/")
	if ok {
		index, err1 := strconv.Atoi(i)
		of, err2 := strconv.Atoi(w)
		if err1 == nil && err2 == nil && of >= 1 && index >= 0 && index < of {
			return Share{Index: index, Of: of}, nil
		}
	}
	return Share{}, fmt.Errorf("share %q: want I/W, W at least 1 and I from 0 to W-1 (such as 0/3)", s)
}

// String writes s as I/W; the whole visit is 0/1.
func (s Share) String() string { return fmt.Sprintf("%d/%d", s.Index, max(s.Of, 1)) }

// Has reports whether slice is one of s's.
func (s Share) Has(slice int) bool { return s.Of <= 1 || slice%s.Of == s.Index }

// Count returns how many of a visit's slices are s's.
func (s Share) Count(slices int) int {
	if s.Of <= 1 {
		return slices
	}
	return (slices - s.Index + s.Of - 1) / s.Of
}

// check returns why s cannot split a visit of slices slices.
func (s Share) check(slices int) error {
	switch {
	case s.Of == 0 && s.Index == 0:
		return nil
	case s.Of < 1 || s.Index < 0 || s.Index >= s.Of:
		return fmt.Errorf("visit: share %d/%d: want W at least 1 and I from 0 to W-1", s.Index, s.Of)
	case slices < s.Of:
		return fmt.Errorf("visit: share %s of %d slices: a share needs a slice at least (give at least %d slices)", s, slices, s.Of)
	}
	return nil
}
