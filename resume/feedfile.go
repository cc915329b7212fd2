package resume

import (
	"context"
	"errors"
	"io"
	"iter"
	"os"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/internal/ledger"
)

// ErrSentBefore is the error a resumed FileFeed reports, as of unknown
// outcome, for an operation not safe to repeat that an earlier run reserved
// and did not finish: it may have been applied, and is not sent again.
var ErrSentBefore = ledger.ErrSentBefore

// FileFeedConfig says what a FileFeed feeds, and what it keeps.
type FileFeedConfig struct {
	// Input holds the operations, as feed.Read reads them, from its
	// start. With a Checkpoint it must be a regular file (*os.File): the
	// input the checkpoint was made from.
	Input io.Reader
	// Checkpoint, if not "", is the path of the feed's checkpoint: the
	// feed resumes from it when it exists, and keeps it up to date.
	Checkpoint string
	// Failed, if not "", is the path F of the files the feed writes what
	// it did not apply to: F, the operations to feed again; F.unknown,
	// those whose outcome is unknown (feeding them again may apply them
	// twice); F.unread, the input from broken JSON on. Each is written as
	// its path and ".partial", and renamed once the feed has ended, so
	// that F never exists cut short.
	Failed string
}

// A FileFeed feeds a file of operations with a [feed.Client], and with a
// checkpoint resumes after any end, a SIGKILL included, with nothing lost
// and nothing not safe to repeat applied twice:
//
//   - the checkpoint covers an operation only once it is done
//     (acknowledged, or reported and written to the failed files, which
//     are synced first), so a resumed feed sends again only what was in
//     flight, about a second of the feed;
//   - an operation not safe to repeat (an increment, say: see
//     feed.Operation.SafeToRepeat) is sent only once a checkpoint on disk
//     reserves it; the resumed feed reports each reserved one not done as
//     of unknown outcome (ErrSentBefore), and never sends it again;
//   - the checkpoint records the input's size and the hashes of what was
//     read of it, and refuses an input that differs; and the failed files'
//     sizes, to which a resume cuts them back, holding back the documents
//     in them so that no later operation overtakes one of theirs.
type FileFeed struct {
	cfg   FileFeedConfig
	ck    *checkpoint // nil without a checkpoint
	files *feedFiles  // nil without failed files
	in    *os.File    // cfg.Input, if a file
	hold  *hold       // the checkpoint's
}

// OpenFileFeed returns the FileFeed of cfg: it reads the checkpoint, if
// there is one, and refuses it if it was made from another input, or with
// other failed files; and it refuses failed files that are the input.
// The FileFeed holds its checkpoint until Close: another run that opens
// it meanwhile gets an error wrapping ErrHeld.
func OpenFileFeed(cfg FileFeedConfig) (*FileFeed, error) {
	f := &FileFeed{cfg: cfg}
	f.in, _ = cfg.Input.(*os.File)
	if cfg.Failed != "" {
		f.files = newFeedFiles(cfg.Failed)
		if err := f.files.checkInput(f.in); err != nil {
			return nil, err
		}
	}
	if cfg.Checkpoint != "" {
		if f.in == nil {
			return nil, errors.New("the input is not a file: a pipe cannot be resumed")
		}
		h, err := takeHold(cfg.Checkpoint)
		if err != nil {
			return nil, err
		}
		ck, err := openCheckpoint(cfg.Checkpoint, f.in, cfg.Failed)
		if err != nil {
			h.release()
			return nil, err
		}
		f.ck, f.hold = ck, h
	}
	return f, nil
}

// Close lets the checkpoint go, for another run to take up.
func (f *FileFeed) Close() error { return f.hold.release() }

// Start returns what OpenFileFeed found at the checkpoint: Complete when
// it says every operation of the input was fed or reported.
func (f *FileFeed) Start() Start {
	resumed := f.ck != nil && f.ck.resumed
	return Start{Resumed: resumed, Complete: resumed && f.ck.file.Complete}
}

// Position returns where a resumed feed starts: the line and byte offset
// of the first operation not done.
func (f *FileFeed) Position() (line int, offset int64) {
	if f.ck == nil {
		return 1, 0
	}
	return f.ck.file.Line, f.ck.file.Offset
}

// Configure returns cfg ready for this feed, for feed.New: the failed
// files as its Failed, Unknown and Unread, and with a checkpoint
// Resumable, BeforeUnsafe and, once resumed, HoldBack. It creates the
// failed files (as F.partial), or, resumed, takes them up where the
// checkpoint left them. Call it once, after any check of cfg that may
// refuse it.
func (f *FileFeed) Configure(cfg feed.Config) (feed.Config, error) {
	if f.files != nil {
		cfg.Failed, cfg.Unknown, cfg.Unread = &f.files.failed, &f.files.unknown, &f.files.unread
		if f.Start().Resumed {
			ids, err := f.files.resume(f.ck.file.FailedSize, f.ck.file.UnknownSize)
			if err != nil {
				return cfg, err
			}
			cfg.HoldBack = ids
		} else if err := f.files.open(); err != nil {
			return cfg, err
		}
	}
	if f.ck != nil {
		if f.files != nil {
			f.files.failed.ck, f.files.unknown.ck = f.ck, f.ck
			f.ck.setFiles(&f.files.failed, &f.files.unknown)
		}
		cfg.Resumable, cfg.BeforeUnsafe = true, f.ck.beforeUnsafe
	}
	return cfg, nil
}

// FileFeedResult is how a FileFeed ended.
type FileFeedResult struct {
	// Report is the feed's.
	Report feed.Report
	// Skipped are the operations skipped as done before the resume.
	Skipped int64
	// Checkpoint is the error of a write of the checkpoint, if one failed:
	// it may then be behind the feed.
	Checkpoint error
	// Files are the failed files the feed left, or could not write whole.
	Files []SideFile
}

// Complete reports whether every operation was acknowledged, and the
// checkpoint and the failed files were written.
func (r FileFeedResult) Complete() bool {
	if !r.Report.Complete() || r.Checkpoint != nil {
		return false
	}
	for _, s := range r.Files {
		if s.Err != nil {
			return false
		}
	}
	return true
}

// Run feeds the input with c, made from Configure's config, from where the
// checkpoint left off, until every operation is acknowledged or reported,
// or ctx ends, or the feed stops; it keeps the checkpoint (every second,
// and at once, in groups, for the operations not safe to repeat), writes
// it last, and finishes the failed files. It returns an error only when
// the input or the checkpoint cannot be read or written at the start. A
// FileFeed runs once.
func (f *FileFeed) Run(ctx context.Context, c *feed.Client) (FileFeedResult, error) {
	if f.Start().Complete {
		r := FileFeedResult{Report: c.Report()}
		if f.files != nil {
			r.Files = f.files.finish()
		}
		return r, nil // nothing to feed
	}
	var ops iter.Seq2[feed.Operation, error]
	var done func(feed.Operation, feed.Result, error)
	if f.ck != nil {
		var err error
		if ops, err = f.ck.read(f.in); err != nil {
			return FileFeedResult{}, err
		}
		if err := f.ck.start(); err != nil {
			return FileFeedResult{}, err
		}
		done = f.ck.done
	} else {
		ops = feed.Read(f.cfg.Input)
	}
	_ = c.Feed(ctx, ops, done) // the report says what the error would
	r := FileFeedResult{Report: c.Report()}
	if f.ck != nil {
		r.Skipped = f.ck.skipped
		r.Checkpoint = f.ck.finish()
	}
	if f.files != nil {
		r.Files = f.files.finish()
	}
	return r, nil
}
