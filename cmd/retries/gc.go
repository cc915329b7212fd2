package main

import "runtime/debug"

// defaultGCPercent is the collector's target (GOGC) of the command when
// the environment sets none. A feed's live heap is a few megabytes (what
// is dispatched, and the connections' buffers), while each document
// allocates about 13 KB on its way (BenchmarkFeed over HTTP/2, its
// server's share included): at Go's default of 100 the collector ran
// every few hundred documents and took about a seventh of the command's
// CPU (the mark workers, the assists and the sweep in a profile of the
// arena's HTTP/2 feed of 100 000 puts, where 400 gave 37-40 µs of CPU per
// document against 41-47 µs, and a peak RSS of 30 MB against 19 MB;
// `vespa feed` held 93 MB in the same run). The heap may grow to five
// times what is live, which Config.MaxDispatchBytes bounds.
const defaultGCPercent = 400

// tuneGC sets the collector's target to defaultGCPercent unless GOGC is
// set in the environment (getenv's).
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
