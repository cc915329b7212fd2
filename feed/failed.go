package feed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// failedWriter writes operations that were not acknowledged to
// Config.Failed, one a line in feed format, so that feeding that file
// finishes the job. Operations on one document are written in input
// order: a failed one is written when it fails, before any later one on
// its document, which is held back (see Client.holdBack). A nil
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

// writeRest writes the input that was not fed, read to its end from
// items, to Config.Failed: the feed stopped early. An operation that
// cannot be parsed is reported and counted, not written; an input error
// ends the reading, and res.unread then stays where the unfed input
// starts.
func (c *Client) writeRest(res *Report, items <-chan readItem) {
	c.out.printf("retries feed: writing the input not fed to the -failed file\n")
	for it := range items {
		if it.err == nil {
			c.failedOut.write(it.op)
			c.tell(it.op.public(), Result{}, &Error{Err: ErrNotSent})
			continue
		}
		if it.err != io.EOF {
			c.tell(it.pub, Result{}, it.err)
		}
		var bad *OperationError
		switch {
		case it.err == io.EOF:
			return
		case errors.As(it.err, &bad):
			res.badInput++
			res.failed++
			c.out.printf("retries feed: %v (not written)\n", it.err)
		default:
			res.badInput++
			res.failed++
			c.out.printf("retries feed: %v\n", it.err)
			var stop *InputError
			if errors.As(it.err, &stop) {
				res.unread, c.broken = stop.from, stop
			}
			return
		}
	}
}
