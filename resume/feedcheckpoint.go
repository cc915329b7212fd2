package resume

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"slices"
	"sync"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/internal/ledger"
)

// Checkpoints of the checkpoint file.
const (
	// checkpointVersion is the format of the feed's state: 2 lists the
	// reservations and the input's hashes; 1, a frontier and the hash of
	// the first MiB, is read too.
	checkpointVersion = 2
)

// checkpointFile is what the checkpoint file holds: which input it is of,
// where the input is fed up to, and what is done and may have been sent
// past that. Ordinals count the input's elements (operations and invalid
// operations) from the watermark's, 0.
type checkpointFile struct {
	Version int   `json:"version"`
	Size    int64 `json:"size"` // the input's size
	// Head is the hash of the input's first MiB (version 1 only).
	Head  string `json:"head,omitempty"`
	Array bool   `json:"array"` // the input is one JSON array
	// Chunks and Tail are the hashes of what the feeds read of the input
	// (see inputHash): a resume refuses an input that differs.
	Chunks []string  `json:"chunks,omitempty"`
	Tail   inputTail `json:"tail"`
	// Failed is the failed files' path F, and FailedSize and UnknownSize how much
	// of F and F.unknown the checkpoint covers.
	Failed      string `json:"failed,omitempty"`
	FailedSize  int64  `json:"failed_size,omitempty"`
	UnknownSize int64  `json:"unknown_size,omitempty"`
	// Offset and Line are the watermark: where the first element not
	// done starts (or the last element, when all are done). Every element
	// before it is acknowledged, or reported (and written to the failed files).
	Offset int64 `json:"offset"`
	Line   int   `json:"line"`
	// Done are the runs of elements done from the watermark on, each
	// [first, last] ordinals.
	Done []ledger.Run `json:"done,omitempty"`
	// Reserved are the runs of operations not safe to repeat that may
	// have been sent and are not done: a resumed feed reports them as of
	// unknown outcome and does not send them again. (Version 1 held a
	// frontier: every operation below it.)
	Reserved reservedRuns `json:"reserved"`
	// Complete is set once a feed read the whole input and reported every
	// element of it.
	Complete bool `json:"complete,omitempty"`
}

// reservedRuns are the reserved runs; a version 1 file's frontier N reads
// as the run [0, N-1].
type reservedRuns []ledger.Run

func (r *reservedRuns) UnmarshalJSON(b []byte) error {
	var n int64
	if json.Unmarshal(b, &n) == nil {
		*r = nil
		if n > 0 {
			*r = reservedRuns{{0, n - 1}}
		}
		return nil
	}
	return json.Unmarshal(b, (*[]ledger.Run)(r))
}

// checkpoint keeps the checkpoint file while the feed runs. Its ledger
// numbers the elements as they are read, from the watermark the feed
// resumed from.
//
// Two rules keep it true after a crash at any point:
//   - the checkpoint covers an element only once the element is done, and once what
//     the feed wrote of it to the failed files is on disk: the feed writes
//     an element's line and then reports it done, on one goroutine, one
//     element at a time (Feed's done is called so), so the files' sizes as
//     done reports an element cover exactly the elements done (see done);
//     a rewrite takes those sizes, and syncs the files before the
//     checkpoint is written.
//   - An operation not safe to repeat is sent only once a checkpoint on disk
//     lists it as reserved: the resumed feed reports every such operation
//     not done as of unknown outcome, and never sends it again. The
//     operations about to go out ask together: a rewrite takes every
//     reservation asked for since the last one, with one sync for all (a
//     group commit), so that what a crash leaves unknown is what may have
//     been on the wire then.
type checkpoint struct {
	path    string
	file    checkpointFile // the identity fields, and what the last rewrite wrote
	resumed bool
	skipped int64 // elements skipped as done before
	led     *ledger.Ledger
	hash    *inputHash

	mu       sync.Mutex
	prevDone []ledger.Run // from the checkpoint resumed from, still ahead of the reading
	onDisk   bool         // this feed has written the file
	eof      bool         // the whole input was read
	clean    bool         // the feed has ended: nothing is in flight

	// The failed files, and their sizes as done last reported an element:
	// what the elements done wrote to them.
	failed, unknown         *outFile
	failedSize, unknownSize int64

	stop    context.CancelFunc // ends the rewrites
	stopped chan error         // the first error rewriting the file, once they have ended
}

// openCheckpoint returns the checkpoint of in, the input, at path: the one
// there, if in is the input it was made from, or a new one. failed is the
// the failed files' path F, which must be the one the checkpoint was made with.
func openCheckpoint(path string, in *os.File, failed string) (*checkpoint, error) {
	st, err := in.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("the input is not a regular file: a pipe cannot be resumed")
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(in, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	id := checkpointFile{Version: checkpointVersion, Size: st.Size(), Array: isArray(head[:n]), Line: 1, Failed: failed}
	ck := &checkpoint{path: path, file: id, led: ledger.New(nil), hash: &inputHash{}}
	c, err := readEnvelope(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ck, nil
	case errors.Is(err, ErrNotCheckpoint):
		return nil, fmt.Errorf("%s is not a checkpoint of this version of a feed", path)
	case err != nil:
		return nil, err
	}
	var prev checkpointFile
	if err := c.Decode("feed", &prev); err != nil {
		return nil, err
	}
	if prev.Version < 1 || prev.Version > checkpointVersion {
		return nil, fmt.Errorf("%s is not a checkpoint of this version of a feed", path)
	}
	switch {
	case prev.Size != id.Size:
		return nil, fmt.Errorf("%s was made from another input, of %d bytes where this one has %d: remove it to feed this input from its start", path, prev.Size, id.Size)
	case prev.Array != id.Array:
		return nil, fmt.Errorf("%s was made from another input (a JSON array where this is not, or the other way round): remove it to feed this input from its start", path)
	case prev.Failed != failed:
		return nil, fmt.Errorf("%s was made with the failed files %q: resume with the same", path, prev.Failed)
	case prev.Offset < 0 || prev.Offset > id.Size || prev.Line < 1:
		return nil, fmt.Errorf("%s is damaged: its offset %d is outside the input", path, prev.Offset)
	}
	if err := verifyInput(in, prev); err != nil {
		return nil, fmt.Errorf("%s was made from another input: %v: remove it to feed this input from its start", path, err)
	}
	if prev.Version == 1 {
		prev.Head = ""
	}
	prev.Version = checkpointVersion
	ck.file, ck.resumed, ck.prevDone = prev, true, prev.Done
	ck.led = ledger.New(prev.Reserved)
	ck.hash.prevChunks, ck.hash.prevTail = prev.Chunks, prev.Tail
	return ck, nil
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
// those done before, each tagged with its entry. in is at its start. The
// bytes read pass through the input's hash.
func (ck *checkpoint) read(in *os.File) (iter.Seq2[feed.Operation, error], error) {
	// From the start of the watermark's chunk, or of the first chunk
	// whose hash the checkpoint lacks (a version 1 checkpoint has none).
	from := min(ck.file.Offset/hashChunk, int64(len(ck.hash.prevChunks))) * hashChunk
	if _, err := in.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	ck.hash.start(from)
	r := io.TeeReader(in, ck.hash)
	if _, err := io.CopyN(io.Discard, r, ck.file.Offset-from); err != nil {
		return nil, err
	}
	var ops iter.Seq2[feed.Operation, error]
	if ck.file.Offset == 0 {
		ops = feed.Read(r)
	} else {
		ops = feed.ReadFrom(r, ck.file.Offset, ck.file.Line, ck.file.Array)
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
			ord := ck.led.Add(off, line)
			skip := ck.doneBefore(ord)
			if skip {
				ck.led.Done(ord)
				ck.skipped++
			}
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

// setFiles gives ck the failed files, whose sizes are what the checkpoint
// resumed from covers.
func (ck *checkpoint) setFiles(failed, unknown *outFile) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.failed, ck.unknown = failed, unknown
	ck.failedSize, ck.unknownSize = failed.size, unknown.size
}

// doneBefore reports whether the element ord was done before the feed
// resumed; ords come in rising order. ck.mu is held.
func (ck *checkpoint) doneBefore(ord int64) bool {
	for len(ck.prevDone) > 0 && ck.prevDone[0][1] < ord {
		ck.prevDone = ck.prevDone[1:]
	}
	return len(ck.prevDone) > 0 && ck.prevDone[0][0] <= ord
}

// done is Feed's done: the element is done, and what it wrote to the
// failed files, if anything, is written: Feed calls done once it has
// written the element's line, one call at a time, on the goroutine that
// writes them, so the files' sizes now are what the elements done so far
// wrote, no more. An operation not sent is left to the resumed feed, and
// its reservation, if any, ends: it was not sent.
func (ck *checkpoint) done(o feed.Operation, _ feed.Result, err error) {
	ord, ok := ck.led.Find(o.Offset)
	if errors.Is(err, feed.ErrNotSent) {
		if ok {
			ck.led.Unreserve(ord)
		}
		return
	}
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ok {
		ck.led.Done(ord)
	}
	if ck.failed != nil {
		ck.failedSize, ck.unknownSize = ck.failed.size, ck.unknown.size
	}
}

// beforeUnsafe is Feed's BeforeUnsafe: an operation not safe to repeat
// goes out once a checkpoint on disk reserves it, and not at all if an
// earlier feed may have sent it (resume.ErrSentBefore).
func (ck *checkpoint) beforeUnsafe(ctx context.Context, o feed.Operation) error {
	ord, ok := ck.led.Find(o.Offset)
	if !ok {
		return nil
	}
	return ck.led.Reserve(ctx, ord)
}

// start writes the first checkpoint, and then rewrites it when an
// operation waits for a reservation (at most every 10 ms, a group for
// all that ask meanwhile), and every second while anything changed,
// until finish.
func (ck *checkpoint) start() error {
	if err := ck.rewrite(); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	ck.stop, ck.stopped = stop, make(chan error, 1)
	go func() {
		ck.stopped <- ledger.Loop{Asked: ck.led.Asked(), Commit: func(context.Context) error { return ck.rewrite() }}.Run(ctx)
	}()
	return nil
}

// finish stops the rewrites and writes the last checkpoint, which is
// complete when the feed read its whole input and every element is done.
func (ck *checkpoint) finish() error {
	ck.stop()
	werr := <-ck.stopped
	ck.mu.Lock()
	ck.clean = true
	ck.mu.Unlock()
	return cmp.Or(werr, ck.rewrite())
}

// rewrite takes a snapshot and, if anything changed, writes it to the file:
// the failed files synced first, then the file written whole under a
// temporary name, synced and renamed. Only then are the operations whose
// reservations it holds let go.
func (ck *checkpoint) rewrite() error {
	f, s, syncs, changed := ck.snapshot()
	if changed {
		if err := ck.write(f, syncs); err != nil {
			return err // ck.file is unchanged: the next rewrite tries again
		}
		ck.mu.Lock()
		ck.file, ck.onDisk = f, true
		ck.mu.Unlock()
	}
	ck.led.Committed(s) // the file holds it, written now or before
	return nil
}

// write syncs the failed files, then writes f to the file.
func (ck *checkpoint) write(f checkpointFile, syncs []*os.File) error {
	for _, s := range syncs {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("the failed files: %v", err)
		}
	}
	return writeEnvelope(ck.path, "feed", f)
}

// snapshot returns what the file is to hold now, and the ledger's snapshot,
// or changed false if the file holds it already: the failed files' sizes
// as done last reported an element, which cover exactly the elements done.
func (ck *checkpoint) snapshot() (f checkpointFile, s ledger.Snapshot, syncs []*os.File, changed bool) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	s = ck.led.Snapshot()
	f = ck.file
	if s.Ord >= 0 {
		f.Offset, f.Line, f.Done = s.Pos, s.Aux, s.Done
	} // else nothing read yet: what the feed resumed from still holds
	f.Reserved = reservedRuns(s.Reserved)
	if ck.clean && ck.eof { // complete once the whole input was read and every element is done
		f.Complete = s.AllDone
	}
	if ck.failed != nil {
		f.FailedSize, f.UnknownSize = ck.failedSize, ck.unknownSize
	}
	f.Chunks, f.Tail = ck.hash.state()
	if ck.onDisk && f.Complete == ck.file.Complete && f.Offset == ck.file.Offset &&
		f.FailedSize == ck.file.FailedSize && f.UnknownSize == ck.file.UnknownSize && slices.Equal(f.Done, ck.file.Done) &&
		slices.Equal(f.Reserved, ck.file.Reserved) && f.Tail == ck.file.Tail && len(f.Chunks) == len(ck.file.Chunks) {
		return ck.file, s, nil, false // the file says it already
	}
	for _, o := range []*outFile{ck.failed, ck.unknown} {
		if o != nil && o.f != nil {
			syncs = append(syncs, o.f)
		}
	}
	return f, s, syncs, true
}
