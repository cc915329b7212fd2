package query

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/seed32e55400/retries"
)

// errNoAnswer is a request that its container left unanswered past the
// timeout it carried (it accepted the connection, and then nothing): the
// endpoint's failure, which its breaker counts as a timed-out attempt,
// and for which it is avoided as for a refused connection. A request
// canceled before then (a hedge won, the caller gave up) says nothing.
var errNoAnswer = fmt.Errorf("query: the container did not answer within the timeout the query carried: %w", retries.ErrAttemptTimeout)

// noAnswer returns err, the failure of a request made under rctx, a child
// of the attempt's ctx: errNoAnswer when rctx's own time ran out while
// ctx had not ended.
func noAnswer(ctx, rctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(context.Cause(rctx), errNoAnswer) {
		return errNoAnswer
	}
	return err
}

// endpointFault is an answer that is the endpoint's failure rather than
// the query's: a 200 that is no Vespa result (a proxy's maintenance page,
// a wrong endpoint). It is not asked again by the Client's policy, but
// the endpoint's breaker counts it (its policy retries any error), and
// while that breaker is open the query goes to another endpoint.
type endpointFault struct {
	err  error
	down bool // from an endpoint whose breaker is open: a probe's
}

func (e *endpointFault) Error() string { return e.err.Error() }
func (e *endpointFault) Unwrap() error { return e.err }

// ErrTooLarge is why an answer's body was not read: it is larger than the
// Client reads (64 MiB); the error matches it.
var ErrTooLarge = errors.New("query: the answer is larger than 64 MiB")

// readBody reads an answer's body whole, up to maxBody, and closes it.
func readBody(body io.ReadCloser) ([]byte, error) {
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err == nil && len(b) > maxBody {
		return nil, retries.Permanent(ErrTooLarge)
	}
	return b, err
}
