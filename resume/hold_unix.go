//go:build unix

package resume

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is lockFile's error when another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile takes an exclusive flock on f without waiting. A flock belongs
// to the open file, so two opens in one process exclude each other too;
// the system lets it go when the file is closed or the process ends.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EWOULDBLOCK:
			return errLocked
		}
		return err
	}
}

// unlockFile lets f's flock go before f is closed: a process forked
// meanwhile (by any goroutine of this one) holds a copy of the descriptor
// until it execs, and a close alone would leave the lock held by that
// copy.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
