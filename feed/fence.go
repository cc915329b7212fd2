package feed

import (
	"context"
	"time"
)

// A Fence says whether a feed may write to Vespa, at two points of each
// request: before it is handed to the transport (Admit, which may wait),
// and as each of its writes reaches a connection (Until, which must not).
// A Kafka member is one: it sends a record only while it owns the
// record's partition and holds the group's lease, the time until which
// the group cannot have given the partition to another member.
type Fence interface {
	// Admit is called before each request of every operation goes on the
	// wire (its retries included), from the goroutine that sends it, and
	// may block. When it returns an error, the request does not go out
	// and the operation is not sent again: an error that matches
	// ErrNotSent ends it with that error, neither written nor counted (its
	// Result.Attempts says whether an earlier request of it went out), as
	// with Config.BeforeUnsafe; another error fails it.
	Admit(context.Context, Operation) error
	// Until returns the time until which the feed may write to Vespa, and
	// is asked again as each write reaches a connection: a write once
	// that time has passed is refused, so the request it carries fails
	// before it is whole on the wire, as a broken connection does (and is
	// retried, through Admit again). Admit checks before a request is
	// handed to the transport; a process stopped between the two (a long
	// GC pause, SIGSTOP, a swapped machine) would otherwise send it when
	// it wakes, however long after. It is called from the transports'
	// goroutines, must not block, and is asked for every write on every
	// connection, control frames of HTTP/2 included: with HTTP/2 a
	// refused write closes its connection with every request on it,
	// which, if not safe to repeat, then ends with an unknown outcome.
	// What is left unfenced is a stop between the check and the write's
	// system call.
	Until() time.Time
	// Lifetime returns a context that ends when the operation may no
	// longer be written at all (a Kafka member's, when its partition moves
	// away), or nil if it always may. It is called once as the operation
	// starts. When it ends, the operation ends as soon as none of its
	// requests is on the wire, wherever it waits (for a retry, the
	// limiter, an endpoint), as if Admit had returned the context's cause;
	// a request on the wire is never abandoned.
	Lifetime(Operation) context.Context
}
