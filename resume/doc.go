// Package resume holds what makes a long job resumable after a crash: a
// [Ledger] that keeps account of a stream of elements whose outcomes come
// back in any order, a [Loop] that commits the job's state (every second,
// and at once, in groups, when an element waits for a reservation), and
// checkpoint files written whole or not at all ([WriteFile]) in one
// versioned format ([Checkpoint]).
//
// The commands of retries (feed -checkpoint, visit -checkpoint, copy
// -checkpoint) and the Kafka member (package kafka) keep their state with
// it; a Go program can do the same for its own jobs.
package resume
