package resume

// Start is what an engine found at its checkpoint when it opened, as its
// Start method returns it: whether the job goes on from there, and how far
// the runs before this one went.
type Start struct {
	// Resumed is set when the job goes on from its checkpoint: unset for a
	// new job, and for one whose checkpoint records nothing done yet.
	Resumed bool
	// Complete is set when the checkpoint says the job was done: Run has
	// nothing left to do.
	Complete bool
	// Before counts what the runs before this one did: the documents in a
	// visit's output, the documents a copy finished (acknowledged, or
	// written to the failed file), those a delete or an update processed.
	// A FileFeed gives its Position instead, and leaves it 0.
	Before int64
}
