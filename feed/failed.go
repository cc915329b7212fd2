package feed

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// failedWriter writes operations that were not acknowledged to
// Config.Failed, one a line in feed format, so that feeding that file
// finishes the job. Operations on one document are written in input
// order: a failed one is written when it fails, before any later one on
// its document, which is held back (see run.admit). A nil
// *failedWriter writes nothing.
type failedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
	n   int64
	err error // the first write error; nothing is written after it
}

// write writes op as the input had it, on one line.
func (w *failedWriter) write(op *operation) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.buf.Reset()
	if err := json.Compact(&w.buf, op.text); err != nil {
		// Unreachable: the scanner let only well-formed JSON through.
		w.buf.Reset()
		w.buf.Write(op.text)
	}
	w.buf.WriteByte('\n')
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		w.err = err
		return
	}
	w.n++
}

// result returns the operations written, and the first write error.
func (w *failedWriter) result() (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.err
}
