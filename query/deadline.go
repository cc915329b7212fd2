package query

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ErrNoTimeLeft is why a query was not sent: what was left of its
// context's deadline was no more than the margin the round trip needs, so
// that an answer could not arrive in time. The error also matches
// context.DeadlineExceeded.
var ErrNoTimeLeft = errors.New("query: too little time left before the deadline to send it")

type noTimeLeft struct{}

func (noTimeLeft) Error() string   { return ErrNoTimeLeft.Error() }
func (noTimeLeft) Unwrap() []error { return []error{ErrNoTimeLeft, context.DeadlineExceeded} }

// timeout returns the timeout to send with a request made at now under a
// deadline (the zero time: none): what is left of it less margin, so that
// the container gives up, and answers, before the caller does. Without a
// deadline it returns 0 (Vespa's default, 0.5 s, applies). It returns an
// error matching ErrNoTimeLeft when nothing would be left.
func timeout(deadline, now time.Time, margin time.Duration) (time.Duration, error) {
	if deadline.IsZero() {
		return 0, nil
	}
	left := deadline.Sub(now) - margin
	if left < time.Millisecond {
		return 0, noTimeLeft{}
	}
	return left.Truncate(time.Millisecond), nil
}

// formatTimeout writes d as Vespa's timeout parameter reads it:
// milliseconds, "73ms".
func formatTimeout(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// rtts keeps the round trips of the last requests answered, for the
// margin: the fastest of them (the network's share, and the least a
// container takes to answer), at least the configured minimum. A round
// trip cut by a timeout of the container's says nothing of the network and
// is not kept.
type rtts struct {
	mu   sync.Mutex
	ring [64]time.Duration
	n    int // kept so far, up to len(ring)
	i    int // the next to overwrite
}

func (r *rtts) add(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.i] = d
	r.i = (r.i + 1) % len(r.ring)
	r.n = min(r.n+1, len(r.ring))
}

// margin returns the fastest round trip kept, at least least, and at
// most a quarter of left (what is left of the deadline), so that a slow
// container does not make the margin eat the query's time.
func (r *rtts) margin(least, left time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return least
	}
	return max(least, min(slices.Min(r.ring[:r.n]), left/4))
}

// median returns the median round trip kept, or 0 for none.
func (r *rtts) median() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0
	}
	return slices.Sorted(slices.Values(r.ring[:r.n]))[r.n/2]
}
