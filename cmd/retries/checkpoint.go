package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/seed32e55400/retries/feed"
)

// Checkpoints of -checkpoint FILE.
const (
	// checkpointVersion is the format of the file.
	checkpointVersion = 1
	// checkpointEvery is the most often the file is rewritten.
	checkpointEvery = time.Second
	// checkpointHead is how much of the input's start the file's hash
	// covers, to tell the input it was made from.
	checkpointHead = 1 << 20
	// minReserve is the fewest elements past the last one read that a
	// rewrite reserves: see checkpoint.
	minReserve = 256
)

// errSentBefore is why an operation not safe to repeat is not sent again
// when a feed resumes: an earlier feed may have sent it, and no answer was
// recorded.
var errSentBefore = errors.New("it may have been in flight when an earlier feed stopped")

// checkpointFile is what -checkpoint FILE holds: where the input is fed up
// to, and what is done past that. Ordinals count the input's elements
// (operations and invalid operations) from the watermark's, 0.
type checkpointFile struct {
	Version int   `json:"version"`
	Size    int64 `json:"size"` // the input's size
	// Head is the SHA-256 of the input's first MiB.
	Head  string `json:"head"`
	Array bool   `json:"array"` // the input is one JSON array
	// Failed is the -failed FILE, and FailedSize and UnknownSize how much
	// of FILE and FILE.unknown the checkpoint covers.
	Failed      string `json:"failed,omitempty"`
	FailedSize  int64  `json:"failed_size,omitempty"`
	UnknownSize int64  `json:"unknown_size,omitempty"`
	// Offset and Line are the watermark: where the first element not
	// done starts (or the last element, when all are done). Every element
	// before it is acknowledged, or reported (and written to -failed).
	Offset int64 `json:"offset"`
	Line   int   `json:"line"`
	// Done are the runs of elements done from the watermark on, each
	// [first, last] ordinals.
	Done [][2]int64 `json:"done,omitempty"`
	// Reserved is the ordinal before which an operation not safe to
	// repeat may have been sent: one not done is not sent again.
	Reserved int64 `json:"reserved"`
	// Complete is set once a feed read the whole input and reported every
	// element of it.
	Complete bool `json:"complete,omitempty"`
}

// ckEntry is one element of the input read since the watermark.
type ckEntry struct {
	ord  int64 // its ordinal in this feed's reading, which starts at the watermark
	off  int64
	line int
	done bool
}

// checkpoint keeps -checkpoint FILE while the feed runs. Elements are
// numbered as they are read, from the watermark the feed resumed from;
// queue holds them from the current watermark on.
//
// Two rules keep it true after a crash at any point:
//   - FILE covers an element only once the element is done, and once what
//     the feed wrote of it to the -failed files is on disk: a rewrite
//     takes its snapshot while no write to them is between its Write and
//     its report (see snapshot), and syncs them before FILE is written.
//   - An operation not safe to repeat is sent only when its ordinal is
//     below the Reserved of a FILE already on disk: the resumed feed
//     counts every such operation not done as possibly sent, and never
//     sends it again. Each rewrite reserves the elements that the next
//     second will likely read (half as many again as the last second
//     read, and at least 256), so that an operation rarely waits, at
//     the cost of reporting, after a crash, the reserved operations that
//     had not gone out yet as of unknown outcome too.
type checkpoint struct {
	path string
	file checkpointFile // the identity fields, and what the last rewrite wrote

	// From the checkpoint this feed resumed from: what is done and what
	// may have been sent before.
	prevDone     [][2]int64
	prevReserved int64
	resumed      bool
	skipped      int64 // elements skipped as done before

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []ckEntry     // in input order: their offsets rise
	next     int64         // the ordinal of the next element read
	reserved int64         // unsafe operations with a lower ordinal may go out
	raised   chan struct{} // closed when reserved rises
	readLast int64         // next at the last rewrite
	onDisk   bool          // this feed has written FILE
	eof      bool          // the whole input was read
	clean    bool          // the feed has ended: nothing is in flight

	// The -failed files' writes: written counts the Writes begun, told
	// the operations reported as written; a snapshot waits for the two to
	// meet, and no Write begins while it waits.
	failed, unknown *outFile
	written, told   int64
	snapping        bool

	stop    chan struct{}
	stopped chan struct{}
	werr    error // the first error rewriting FILE
}

// openCheckpoint returns the checkpoint of in, the input, at path: the one
// there, if in is the input it was made from, or a new one. failed is the
// -failed FILE, which must be the one the checkpoint was made with.
func openCheckpoint(path string, in *os.File, failed string) (*checkpoint, error) {
	id, err := identify(in)
	if err != nil {
		return nil, err
	}
	id.Line = 1
	ck := &checkpoint{path: path, file: id, raised: make(chan struct{})}
	ck.cond = sync.NewCond(&ck.mu)
	ck.file.Failed = failed
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ck, nil
	case err != nil:
		return nil, err
	}
	var prev checkpointFile
	if err := json.Unmarshal(data, &prev); err != nil || prev.Version != checkpointVersion {
		return nil, fmt.Errorf("%s is not a checkpoint of this version of retries feed", path)
	}
	switch {
	case prev.Size != id.Size || prev.Head != id.Head:
		return nil, fmt.Errorf("%s was made from another input (size %d, not %d, or other content): remove it to feed this input from its start", path, prev.Size, id.Size)
	case prev.Failed != failed:
		return nil, fmt.Errorf("%s was made with -failed %q: resume with the same", path, prev.Failed)
	case prev.Offset < 0 || prev.Offset > id.Size || prev.Line < 1:
		return nil, fmt.Errorf("%s is damaged: its offset %d is outside the input", path, prev.Offset)
	}
	ck.file = prev
	ck.resumed = true
	ck.prevDone, ck.prevReserved = prev.Done, prev.Reserved
	ck.reserved = prev.Reserved // what FILE on disk reserves
	return ck, nil
}

// identify returns the identity of the input in: its size, the hash of its
// first MiB, and whether it is a JSON array. It leaves in at its start.
func identify(in *os.File) (checkpointFile, error) {
	st, err := in.Stat()
	if err != nil {
		return checkpointFile{}, err
	}
	if !st.Mode().IsRegular() {
		return checkpointFile{}, errors.New("the input is not a regular file: a pipe cannot be resumed")
	}
	h := sha256.New()
	head := make([]byte, checkpointHead)
	n, err := io.ReadFull(in, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return checkpointFile{}, err
	}
	h.Write(head[:n])
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return checkpointFile{}, err
	}
	return checkpointFile{Version: checkpointVersion, Size: st.Size(), Head: hex.EncodeToString(h.Sum(nil)), Array: isArray(head[:n])}, nil
}

// isArray reports whether an input starting with head is a JSON array: its
// first byte that is not white space (after a byte order mark) is '['.
func isArray(head []byte) bool {
	if len(head) >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF {
		head = head[3:]
	}
	for _, c := range head {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '['
	}
	return false
}

// read returns the elements of in to feed: from the watermark on, without
// those done before, each tagged with its entry. in is at its start.
func (ck *checkpoint) read(in *os.File) (iter.Seq2[feed.Operation, error], error) {
	var ops iter.Seq2[feed.Operation, error]
	if ck.file.Offset == 0 {
		ops = feed.Read(in)
	} else {
		if _, err := in.Seek(ck.file.Offset, io.SeekStart); err != nil {
			return nil, err
		}
		ops = feed.ReadFrom(in, ck.file.Offset, ck.file.Line, ck.file.Array)
	}
	return func(yield func(feed.Operation, error) bool) {
		for o, err := range ops {
			off, line := o.Offset, o.Line
			var bad *feed.OperationError
			var stop *feed.InputError
			switch {
			case errors.As(err, &bad):
				off, line = bad.Offset, bad.Line
			case errors.As(err, &stop):
				off, line = stop.Offset, stop.Line
			}
			ck.mu.Lock()
			e := ckEntry{ord: ck.next, off: off, line: line}
			ck.next++
			skip := ck.doneBefore(e.ord)
			if skip {
				e.done = true
				ck.skipped++
			}
			ck.queue = append(ck.queue, e)
			ck.mu.Unlock()
			if skip {
				continue
			}
			if err != nil {
				o.Offset = off // so that done finds it
			}
			if !yield(o, err) {
				return
			}
		}
		ck.mu.Lock()
		ck.eof = true
		ck.mu.Unlock()
	}, nil
}

// doneBefore reports whether the element ord was done before the feed
// resumed; ords come in rising order. ck.mu is held.
func (ck *checkpoint) doneBefore(ord int64) bool {
	for len(ck.prevDone) > 0 && ck.prevDone[0][1] < ord {
		ck.prevDone = ck.prevDone[1:]
	}
	return len(ck.prevDone) > 0 && ck.prevDone[0][0] <= ord
}

// find returns the entry of the element read at offset off, or nil.
// ck.mu is held.
func (ck *checkpoint) find(off int64) *ckEntry {
	i, ok := slices.BinarySearchFunc(ck.queue, off, func(e ckEntry, off int64) int { return cmp.Compare(e.off, off) })
	if !ok {
		return nil
	}
	return &ck.queue[i]
}

// done is Feed's done: the element is done, and what it wrote to the
// -failed files, if anything, is written.
func (ck *checkpoint) done(o feed.Operation, _ feed.Result, err error) {
	if errors.Is(err, feed.ErrNotSent) {
		return // left to the resumed feed
	}
	var fe *feed.Error
	wrote := ck.failed != nil && errors.As(err, &fe)
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if e := ck.find(o.Offset); e != nil {
		e.done = true
	}
	if wrote {
		ck.told++
		ck.cond.Broadcast()
	}
}

// beforeUnsafe is Feed's BeforeUnsafe: an operation not safe to repeat
// goes out once a checkpoint on disk reserves it, and not at all if an
// earlier feed may have sent it.
func (ck *checkpoint) beforeUnsafe(ctx context.Context, o feed.Operation) error {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	e := ck.find(o.Offset)
	if e == nil {
		return nil
	}
	ord := e.ord
	if ck.resumed && ord < ck.prevReserved {
		return errSentBefore
	}
	for ord >= ck.reserved {
		raised := ck.raised
		ck.mu.Unlock()
		select {
		case <-raised:
		case <-ctx.Done():
			ck.mu.Lock()
			return ctx.Err()
		}
		ck.mu.Lock()
	}
	return nil
}

// beginWrite is called by a -failed file before each Write: it waits while
// a snapshot is taken.
func (ck *checkpoint) beginWrite() {
	ck.mu.Lock()
	for ck.snapping {
		ck.cond.Wait()
	}
	ck.written++
	ck.mu.Unlock()
}

// start writes the first checkpoint, which reserves the first operations,
// and then rewrites it every second while anything changed, until finish.
func (ck *checkpoint) start() error {
	if err := ck.rewrite(); err != nil {
		return err
	}
	ck.stop, ck.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ck.stopped)
		t := time.NewTicker(checkpointEvery)
		defer t.Stop()
		for {
			select {
			case <-ck.stop:
				return
			case <-t.C:
				if err := ck.rewrite(); err != nil {
					ck.mu.Lock()
					ck.werr = cmp.Or(ck.werr, err)
					ck.mu.Unlock()
				}
			}
		}
	}()
	return nil
}

// finish stops the rewrites and writes the last checkpoint, which is
// complete when the feed read its whole input and every element is done.
func (ck *checkpoint) finish() error {
	close(ck.stop)
	<-ck.stopped
	ck.mu.Lock()
	ck.clean = true
	ck.mu.Unlock()
	err := ck.rewrite()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return cmp.Or(ck.werr, err)
}

// rewrite takes a snapshot and, if anything changed, writes it to FILE:
// the -failed files synced first, then FILE written whole under a
// temporary name, synced and renamed. Only then are the operations it
// reserves let go.
func (ck *checkpoint) rewrite() error {
	f, raise, syncs, changed := ck.snapshot()
	if !changed {
		return nil
	}
	if err := ck.write(f, syncs); err != nil {
		return err // ck.file is unchanged: the next rewrite tries again
	}
	ck.mu.Lock()
	ck.file = f
	if raise > ck.reserved {
		ck.reserved = raise
		close(ck.raised)
		ck.raised = make(chan struct{})
	}
	ck.mu.Unlock()
	return nil
}

// write syncs the -failed files, then writes f to FILE.
func (ck *checkpoint) write(f checkpointFile, syncs []*os.File) error {
	for _, s := range syncs {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("-failed: %v", err)
		}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeFileSync(ck.path, append(data, '\n'))
}

// snapshot returns what FILE is to hold now, and the reservation it makes,
// or changed false if it would hold what it does. It waits until every
// Write to the -failed files begun has been reported, and lets none begin
// meanwhile, so that their sizes cover exactly the elements done.
func (ck *checkpoint) snapshot() (f checkpointFile, raise int64, syncs []*os.File, changed bool) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.snapping = true
	for ck.told < ck.written {
		ck.cond.Wait()
	}
	ck.snapping = false
	ck.cond.Broadcast()
	// The watermark: drop the done prefix, keeping the last element.
	i := 0
	for i < len(ck.queue)-1 && ck.queue[i].done {
		i++
	}
	ck.queue = ck.queue[i:]
	read := ck.next - ck.readLast
	raise = ck.next + max(minReserve, read+read/2)
	f = ck.file
	if ck.clean && ck.eof { // complete once the whole input was read and every element is done
		f.Complete = !slices.ContainsFunc(ck.queue, func(e ckEntry) bool { return !e.done })
	}
	if ck.failed != nil {
		f.FailedSize, f.UnknownSize = ck.failed.size, ck.unknown.size
	}
	f.Done = nil
	base := int64(0)
	if len(ck.queue) > 0 {
		e := ck.queue[0]
		f.Offset, f.Line, base = e.off, e.line, e.ord
		for _, e := range ck.queue {
			if !e.done {
				continue
			}
			if n := len(f.Done); n > 0 && f.Done[n-1][1] == e.ord-base-1 {
				f.Done[n-1][1]++
			} else {
				f.Done = append(f.Done, [2]int64{e.ord - base, e.ord - base})
			}
		}
	} else {
		f.Done = ck.file.Done // nothing read yet: what the feed resumed from still holds
	}
	f.Reserved = max(raise, ck.reserved) - base
	if ck.clean {
		// Every operation this feed sent has ended, and is done, or not
		// sent at all: it reserves none.
		f.Reserved = 0
	}
	// What the feed resumed from may have reserved operations that are
	// not done yet.
	if ck.resumed {
		f.Reserved = max(f.Reserved, ck.prevReserved-base)
	}
	if ck.onDisk && f.Complete == ck.file.Complete && f.Offset == ck.file.Offset && f.Reserved == ck.file.Reserved &&
		f.FailedSize == ck.file.FailedSize && f.UnknownSize == ck.file.UnknownSize && slices.Equal(f.Done, ck.file.Done) {
		return ck.file, 0, nil, false // FILE says it already
	}
	ck.onDisk, ck.readLast = true, ck.next
	for _, o := range []*outFile{ck.failed, ck.unknown} {
		if o != nil && o.f != nil {
			syncs = append(syncs, o.f)
		}
	}
	return f, max(raise, ck.reserved), syncs, true
}

// writeFileSync writes data to path whole, or leaves path as it was: it
// writes a temporary file beside it, syncs it, renames it over path and
// syncs the directory.
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
