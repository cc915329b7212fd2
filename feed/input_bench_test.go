package feed

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// benchFeed is a feed of n operations in JSON lines: puts with about
// 200 bytes of fields, updates (half of them with arithmetic) and removes.
func benchFeed(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		switch i % 4 {
		case 0, 1:
			fmt.Fprintf(&b, `{"put": "id:music:music::doc-%d", "fields": {"title": "A Head Full of Dreams %d", "artist": "Coldplay", "year": 2015, "tags": ["pop", "rock", "british"], "vector": [0.125, -1.5, 3e-7, 42], "text": "the quick brown fox jumps over the lazy dog"}}`+"\n", i, i)
		case 2:
			fmt.Fprintf(&b, `{"update": "id:music:music::doc-%d", "condition": "music.year==2015", "fields": {"year": {"assign": 2016}, "plays": {"increment": 1}}}`+"\n", i-1)
		case 3:
			fmt.Fprintf(&b, `{"remove": "id:music:music:g=coldplay:doc-%d"}`+"\n", i)
		}
	}
	return b.Bytes()
}

// BenchmarkOpReader reads a 100 000-line feed; ns/op is per operation.
func BenchmarkOpReader(b *testing.B) {
	const n = 100_000
	data := benchFeed(n)
	b.SetBytes(int64(len(data)) / n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N / n {
		readAll(b, data, n)
	}
	if rest := b.N % n; rest > 0 {
		readAll(b, data[:lineEnd(data, rest)], rest)
	}
}

// lineEnd is the offset just after the n-th line of data.
func lineEnd(data []byte, n int) int {
	off := 0
	for range n {
		off += bytes.IndexByte(data[off:], '\n') + 1
	}
	return off
}

func readAll(b *testing.B, data []byte, want int) {
	r := newOpReader(bytes.NewReader(data))
	got := 0
	for {
		_, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		got++
	}
	if got != want {
		b.Fatalf("read %d operations, want %d", got, want)
	}
}
