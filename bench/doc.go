// Package bench compares the retries library with other Go retry
// libraries: the cost of a call through each (bench_test.go) and how each
// behaves where retry code usually goes wrong (traps_test.go). It holds no
// code of its own; it is a separate module so that the library's go.mod
// keeps its single dependency.
package bench
