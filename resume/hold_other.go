//go:build !unix

package resume

import (
	"errors"
	"os"
)

// errLocked is lockFile's error when another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile takes no lock on systems other than Unix: there a checkpoint
// is not held, and two runs on one must be kept apart by their operator.
func lockFile(*os.File) error { return nil }

// unlockFile has no lock to let go.
func unlockFile(*os.File) error { return nil }
