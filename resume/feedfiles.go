package resume

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/seed32e55400/retries/feed"
)

// outFile is one of the files a feed writes for its failed files: it is written as
// PATH.partial and renamed to PATH only once the feed has ended and the
// file is complete, so that PATH never exists cut short. A feed killed
// before its end leaves PATH.partial. It is created at its first write,
// unless create makes it first (feedFiles.open does, for F).
type outFile struct {
	path string
	f    *os.File
	err  error       // the first error creating or writing the file
	size int64       // its size: what it held when a feed resumed, and what was written since
	ck   *checkpoint // with a checkpoint, whose lock guards f, err and size
}

func (o *outFile) partial() string { return o.path + ".partial" }

// create creates PATH.partial.
func (o *outFile) create() error {
	o.f, o.err = os.Create(o.partial())
	return o.err
}

func (o *outFile) Write(p []byte) (int, error) {
	o.lock()
	if o.f == nil && o.err == nil {
		_ = o.create()
	}
	f, err := o.f, o.err
	o.unlock()
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	o.lock()
	defer o.unlock()
	if err != nil && o.err == nil {
		o.err = err
	}
	o.size += int64(n)
	return n, err
}

// lock and unlock guard f, err and size with a checkpoint, whose rewrites
// read them; without, only the feed's writer uses them.
func (o *outFile) lock() {
	if o.ck != nil {
		o.ck.mu.Lock()
	}
}

func (o *outFile) unlock() {
	if o.ck != nil {
		o.ck.mu.Unlock()
	}
}

// finish closes the file and, unless creating, writing or closing it
// failed, renames it to PATH. It reports whether PATH is now there.
func (o *outFile) finish() (bool, error) {
	if o.f == nil {
		return false, o.err
	}
	if err := o.f.Close(); err != nil && o.err == nil {
		o.err = err
	}
	if o.err == nil {
		o.err = os.Rename(o.partial(), o.path)
	}
	return o.err == nil, o.err
}

// feedFiles are the files of FileFeedConfig.Failed F: F for the operations to feed
// again, F.unknown for those whose outcome is unknown, F.unread for the
// input that broken JSON left unread.
type feedFiles struct {
	failed, unknown, unread outFile
	resumed                 bool // taken up from a checkpoint: F holds earlier feeds' operations too
}

func newFeedFiles(path string) *feedFiles {
	return &feedFiles{
		failed:  outFile{path: path},
		unknown: outFile{path: path + ".unknown"},
		unread:  outFile{path: path + ".unread"},
	}
}

func (ff *feedFiles) all() []*outFile { return []*outFile{&ff.failed, &ff.unknown, &ff.unread} }

// checkInput returns an error if in, the input, is one of the files or
// their .partial.
func (ff *feedFiles) checkInput(in *os.File) error {
	if in == nil {
		return nil
	}
	b, err := in.Stat()
	if err != nil {
		return nil
	}
	for _, o := range ff.all() {
		for _, p := range []string{o.path, o.partial()} {
			if a, err := os.Stat(p); err == nil && os.SameFile(a, b) {
				return fmt.Errorf("%s %w", p, ErrFailedIsInput)
			}
		}
	}
	return nil
}

// open removes what an earlier feed left under the files' names, so that
// none of it passes for this feed's, and creates F.partial.
func (ff *feedFiles) open() error {
	for _, o := range ff.all() {
		for _, p := range []string{o.path, o.partial()} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return ff.failed.create()
}

// resume takes up F and F.unknown where a feed that a checkpoint covers
// left them, at the sizes it covers: a feed killed left F.partial, one
// that ended left F. F.unread stays: it holds the input from broken JSON
// on, which the checkpoint counts as reported, and a resume that meets
// the broken JSON again writes it again. It returns the
// document ids of their operations, which the feed holds back so that no
// later operation overtakes them.
func (ff *feedFiles) resume(failedSize, unknownSize int64) (ids []string, err error) {
	for _, r := range []struct {
		o    *outFile
		size int64
	}{{&ff.failed, failedSize}, {&ff.unknown, unknownSize}} {
		o := r.o
		if _, err := os.Stat(o.partial()); errors.Is(err, fs.ErrNotExist) {
			err := os.Rename(o.path, o.partial())
			switch {
			case errors.Is(err, fs.ErrNotExist) && r.size == 0 && o != &ff.failed:
				continue // created at its first write
			case errors.Is(err, fs.ErrNotExist) && r.size == 0:
			case err != nil:
				return nil, fmt.Errorf("the checkpoint covers %d bytes of %s: %v", r.size, o.path, err)
			}
		}
		if o.f, o.err = os.OpenFile(o.partial(), os.O_RDWR|os.O_CREATE, 0o644); o.err != nil {
			return nil, o.err
		}
		st, err := o.f.Stat()
		if err != nil {
			return nil, err
		}
		if st.Size() < r.size {
			return nil, fmt.Errorf("%s holds %d bytes, fewer than the %d the checkpoint covers", o.partial(), st.Size(), r.size)
		}
		if err := o.f.Truncate(r.size); err != nil {
			return nil, err
		}
		for op, err := range feed.Read(io.LimitReader(o.f, r.size)) {
			if err == nil {
				ids = append(ids, op.ID)
			}
		}
		if _, err := o.f.Seek(r.size, io.SeekStart); err != nil {
			return nil, err
		}
		o.size = r.size
	}
	ff.resumed = true
	return ids, nil
}

// ErrFailedIsInput is what OpenFileFeed returns, after the file's path,
// when one of the failed files (or its .partial) is the input: writing it
// would destroy the input.
var ErrFailedIsInput = errors.New("is the input")

// SideFile is one of the files of FileFeedConfig.Failed F that a feed
// left in place (F always, F.unknown and F.unread once written to), or
// could not write whole.
type SideFile struct {
	// Kind is "failed" (F: operations to feed again), "unknown" (F.unknown:
	// operations whose outcome is unknown, which feeding again may apply
	// twice) or "unread" (F.unread: the input from broken JSON on).
	Kind string
	Path string
	// Err, if not nil, is why the file is not whole: Path+".partial"
	// holds what was written.
	Err error
}

// finish finishes each file, and returns those it left in place, or could
// not write whole.
func (ff *feedFiles) finish() []SideFile {
	var out []SideFile
	for i, o := range ff.all() {
		kind := [3]string{"failed", "unknown", "unread"}[i]
		done, err := o.finish()
		switch {
		case err != nil:
			out = append(out, SideFile{Kind: kind, Path: o.path, Err: err})
		case done:
			out = append(out, SideFile{Kind: kind, Path: o.path})
		}
	}
	return out
}
