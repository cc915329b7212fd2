package main

import (
	"errors"
	"flag"

	"github.com/seed32e55400/retries/visit"
)

// shareFlag is -share I/W: this process takes the I-th of W shares of the
// run's slices (visit.Share).
type shareFlag struct {
	share visit.Share
	set   bool
}

func (f *shareFlag) String() string {
	if !f.set {
		return ""
	}
	return f.share.String()
}

func (f *shareFlag) Set(v string) error {
	s, err := visit.ParseShare(v)
	if err != nil {
		return errors.New("want I/W, W at least 1 and I from 0 to W-1 (such as 0/3)")
	}
	f.share, f.set = s, true
	return nil
}

// slicesPerShare is how many slices a share takes when -slices is not
// given: enough for its visits to go on at once while the server allows,
// and for the shares to stay even when one meets a slow part.
const slicesPerShare = 8

// addShareFlag defines -share on fs, for a run of what.
func addShareFlag(fs *flag.FlagSet, f *shareFlag, what string) {
	fs.Var(f, "share", "take the I-th of W shares of the "+what+"'s slices (`I/W`, such as 0/3), one process each (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX); -slices is then the total, "+
		"8 a share by default, and each share has its own -checkpoint (see docs/scale.md)")
}

// shareSlices returns the total of slices for a run with share: -slices
// when given on fs, else slicesPerShare a share with a share, else slices.
func shareSlices(fs *flag.FlagSet, share shareFlag, slices int) int {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "slices" })
	if share.set && !given {
		return slicesPerShare * share.share.Of
	}
	return slices
}

// checkShare returns a usage error for a share of slices it cannot split.
func checkShare(name string, share shareFlag, slices int) error {
	if share.set && slices < share.share.Of {
		return usageErrorf("%s: -share %s of -slices %d: a share needs a slice at least (give -slices %d or more)", name, share.share, slices, share.share.Of)
	}
	return nil
}
