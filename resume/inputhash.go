package resume

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
)

// hashChunk is the size of the chunks of the input whose hashes a
// checkpoint keeps.
const hashChunk = 4 << 20

// inputTail is the hash of the bytes read past the last whole chunk.
type inputTail struct {
	Len  int64  `json:"len"`
	Hash string `json:"hash,omitempty"`
}

// inputHash hashes the input as the feed reads it, chunk by chunk from
// its start, so that a resume can tell whether any byte an earlier feed
// read has changed since: a line edited in place, or blanked, past the
// input's first bytes. It keeps, while the feed has read less, what an
// earlier feed covered.
type inputHash struct {
	mu     sync.Mutex
	chunks []string  // the hashes of the whole chunks read, from the input's start
	h      hash.Hash // of the current chunk
	n      int64     // bytes of the current chunk hashed

	prevChunks []string // an earlier feed's
	prevTail   inputTail
}

// start begins hashing at from, the start of a chunk, keeping the hashes
// of the chunks before it.
func (ih *inputHash) start(from int64) {
	ih.mu.Lock()
	defer ih.mu.Unlock()
	ih.chunks = append([]string(nil), ih.prevChunks[:from/hashChunk]...)
	ih.h, ih.n = sha256.New(), 0
}

// Write hashes p, the next bytes of the input.
func (ih *inputHash) Write(p []byte) (int, error) {
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if ih.h == nil {
		ih.h = sha256.New()
	}
	n := len(p)
	for len(p) > 0 {
		k := min(int64(len(p)), hashChunk-ih.n)
		ih.h.Write(p[:k])
		ih.n += k
		p = p[k:]
		if ih.n == hashChunk {
			ih.chunks = append(ih.chunks, sum(ih.h))
			ih.h.Reset()
			ih.n = 0
		}
	}
	return n, nil
}

// state returns the hashes that cover the most of the input read: this
// feed's, or an earlier one's while this one has read less.
func (ih *inputHash) state() ([]string, inputTail) {
	ih.mu.Lock()
	defer ih.mu.Unlock()
	tail := inputTail{Len: ih.n}
	if ih.h != nil && ih.n > 0 {
		tail.Hash = sum(ih.h)
	}
	read := int64(len(ih.chunks))*hashChunk + ih.n
	if prev := int64(len(ih.prevChunks))*hashChunk + ih.prevTail.Len; prev > read {
		return ih.prevChunks, ih.prevTail
	}
	return append([]string(nil), ih.chunks...), tail
}

// sum is the hash so far, as kept: 16 bytes of SHA-256, in hex.
func sum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)[:16]) }

// verifyInput checks that in holds what the feeds of checkpoint f read:
// each chunk and the tail hash the same (version 1: the first MiB). It
// leaves in at its start.
func verifyInput(in *os.File, f checkpointFile) error {
	defer in.Seek(0, io.SeekStart)
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if f.Version == 1 {
		h := sha256.New()
		if _, err := io.CopyN(h, in, 1<<20); err != nil && err != io.EOF {
			return err
		}
		if hex.EncodeToString(h.Sum(nil)) != f.Head {
			return fmt.Errorf("its first MiB differs")
		}
		return nil
	}
	h := sha256.New()
	for i, want := range f.Chunks {
		h.Reset()
		if _, err := io.CopyN(h, in, hashChunk); err != nil {
			return fmt.Errorf("bytes %d to %d: %v", int64(i)*hashChunk, int64(i+1)*hashChunk, err)
		}
		if sum(h) != want {
			return fmt.Errorf("bytes %d to %d differ", int64(i)*hashChunk, int64(i+1)*hashChunk)
		}
	}
	if f.Tail.Len > 0 {
		h.Reset()
		from := int64(len(f.Chunks)) * hashChunk
		if _, err := io.CopyN(h, in, f.Tail.Len); err != nil {
			return fmt.Errorf("bytes %d to %d: %v", from, from+f.Tail.Len, err)
		}
		if sum(h) != f.Tail.Hash {
			return fmt.Errorf("bytes %d to %d differ", from, from+f.Tail.Len)
		}
	}
	return nil
}
