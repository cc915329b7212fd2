package feed

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sync"
)

// Compression says which request bodies go out gzipped.
type Compression int

const (
	// CompressAuto gzips bodies over compressAbove bytes, as Vespa's
	// clients do.
	CompressAuto Compression = iota
	// CompressNone sends every body as it is.
	CompressNone
	// CompressGzip gzips every body.
	CompressGzip
)

// compressAbove is the body size above which CompressAuto gzips.
const compressAbove = 512

// ParseCompression reads "auto", "gzip" or "none".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "auto":
		return CompressAuto, nil
	case "none":
		return CompressNone, nil
	case "gzip":
		return CompressGzip, nil
	}
	return 0, fmt.Errorf("%q: want auto, gzip or none", s)
}

// gzippers are reused gzip writers, at gzip.BestSpeed: feed bodies are JSON,
// which the fastest level already shrinks several times.
var gzippers = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// wireBody returns the body to send for op under c, and whether it is
// gzipped. It is computed once per operation: every attempt, retries
// included, sends the same bytes.
func wireBody(body []byte, c Compression) ([]byte, bool) {
	if c == CompressNone || c == CompressAuto && len(body) <= compressAbove {
		return body, false
	}
	var b bytes.Buffer
	b.Grow(len(body) / 3)
	zw := gzippers.Get().(*gzip.Writer)
	zw.Reset(&b)
	_, _ = zw.Write(body) // a bytes.Buffer does not fail
	_ = zw.Close()
	gzippers.Put(zw)
	return b.Bytes(), true
}
