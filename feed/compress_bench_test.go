package feed

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkWireBody measures gzipping one operation's body: the arena's
// small put, and a put of 2 KiB of text fields, with the size on the wire
// as a share of the body's.
func BenchmarkWireBody(b *testing.B) {
	small := []byte(`{"fields":{"title":"song 12345","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)
	var sb strings.Builder
	sb.WriteString(`{"fields":{`)
	for i := 0; sb.Len() < 2048; i++ {
		fmt.Fprintf(&sb, `"text_%d":"the quick brown fox %d jumps over the lazy dog, item %d of the catalogue",`, i, i*7, i)
	}
	sb.WriteString(`"end":true}}`)
	large := []byte(sb.String())
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"2KiB", large}} {
		for _, c := range []struct {
			name string
			c    Compression
		}{{"none", CompressNone}, {"gzip", CompressGzip}} {
			b.Run("body="+body.name+"/compression="+c.name, func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for b.Loop() {
					out, _ := wireBody(body.b, c.c)
					n = len(out)
				}
				b.ReportMetric(float64(n)/float64(len(body.b)), "wire/body")
			})
		}
	}
}
