package resume

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// ErrHeld is what opening a checkpoint returns, wrapped with its path and
// what its holder wrote of itself, while another run holds it: two runs on
// one checkpoint would each send what the other sent, and write over each
// other's output and checkpoint.
var ErrHeld = errors.New("in use by another run")

// A hold is a run's exclusive hold on a checkpoint: a lock on the file
// beside it, path + ".lock", which the system lets go when the process
// ends, however it ends, so that a run killed leaves nothing that blocks
// the next. The lock file stays; it holds the holder's process id, host
// and start, which a run refused reads out.
type hold struct{ f *os.File }

// takeHold takes the hold of the checkpoint at path, or returns an error
// wrapping ErrHeld, at once, if another run has it.
func takeHold(path string) (*hold, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 512))
		f.Close()
		if errors.Is(err, errLocked) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "a run that is starting"
			}
			return nil, fmt.Errorf("%s is %w (%s): wait for it to end, or stop it", path, ErrHeld, who)
		}
		return nil, fmt.Errorf("%s.lock: %w", path, err)
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("process %d on %s, since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(who), 0)
	}
	return &hold{f: f}, nil
}

// holdAndRead takes the hold of the checkpoint at path and reads it: found
// is false when there is none yet. A file that is no checkpoint is said to
// be none of a job of kind; on any error the hold is let go.
func holdAndRead(path, kind string) (h *hold, c envelope, found bool, err error) {
	if h, err = takeHold(path); err != nil {
		return nil, c, false, err
	}
	c, err = readEnvelope(path)
	switch {
	case err == nil:
		return h, c, true, nil
	case errors.Is(err, fs.ErrNotExist):
		return h, c, false, nil
	case errors.Is(err, ErrNotCheckpoint):
		err = fmt.Errorf("%s is not a checkpoint of %s", path, describe(kind))
	}
	h.release()
	return nil, c, false, err
}

// release lets the hold go; a nil hold has nothing to let go.
func (h *hold) release() error {
	if h == nil || h.f == nil {
		return nil
	}
	uerr := unlockFile(h.f)
	err := h.f.Close()
	h.f = nil
	if err == nil {
		err = uerr
	}
	return err
}
