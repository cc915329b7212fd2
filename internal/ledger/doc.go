// Package ledger keeps account of a resumable job's elements and commits
// its state: a [Ledger] of a stream of elements whose outcomes come back in
// any order (which are done, the watermark, which elements not safe to
// repeat may have been sent), and a [Loop] that commits the job's state
// every second, and at once, in groups, when an element waits for a
// reservation.
//
// Package resume's file feed and copy and the Kafka member (module kafka)
// keep their accounts with it; it is internal so that its API can change
// with them.
package ledger
