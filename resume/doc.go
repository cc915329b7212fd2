// Package resume runs long Vespa jobs so that they survive any end, a
// SIGKILL included: a feed of a file ([FileFeed]), a visit to a file
// ([Visitor]), a copy between clusters ([Copier]), and a delete or an
// update by selection ([Bulk]), each with a checkpoint file.
//
// The engines share one shape. OpenX takes the checkpoint's hold (one run
// per checkpoint: another gets [ErrHeld]), reads it, refuses one of another
// job, and writes what a resume needs before anything is sent; Start says
// what it found; Run does the work and keeps the checkpoint, written whole
// or not at all; Close lets the hold go. docs/resume.md says what each
// promises after a crash.
//
// The commands of retries (feed, visit, copy, delete and update with
// -checkpoint) are built on these engines alone.
package resume
