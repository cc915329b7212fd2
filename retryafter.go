package retries

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WaitRetryAfter waits what the server asked for in a Retry-After header,
// capped at limit, and otherwise what fallback waits. The header is read from
// the outcome of the attempt that just ended: a [*http.Response] value, a
// [*StatusError] in the error chain (as [CheckStatus] returns), or the
// response held by a [*RetryError] in the error chain (as an inner
// [Transport] returns when it gives up). Both forms of the header count:
// delta-seconds ("120") and an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"),
// which is read against the current time. A value that does not parse, a
// negative number, and a date that has passed are ignored, and fallback
// decides. A Retry-After of 0 means no wait.
//
// A value above limit waits limit. The wait never
// bypasses the policy's [Stop], which sees it in State.Wait, nor the
// context's deadline: a Retry-After that would end past it ends the call at
// once. When fallback asks to give up (a [WaitBackOff] whose BackOff
// returned backoff.Stop), the policy gives up, whatever the header says.
//
// None of the seven policies reads Retry-After, as none of pyvespa's does.
// Add it to any of them with [Policy.Copy]:
//
//	p := retries.DocV1.Copy(retries.WithWait(retries.WaitRetryAfter(retries.DocV1.Wait(), 30*time.Second)))
//
// A policy with a [Limiter] honours a Retry-After on backpressure without
// WaitRetryAfter, and more widely: the limiter holds every attempt that
// shares it, not only the one retried (see [WithLimiter]).
//
// WaitRetryAfter panics if limit is negative.
func WaitRetryAfter(fallback Wait, limit time.Duration) Wait {
	checkNonNegative("WaitRetryAfter", "limit", limit)
	return Wait{&retryAfter{fallback: fallback, max: limit}}
}

type retryAfter struct {
	fallback Wait
	max      time.Duration
}

func (r *retryAfter) next(s State) (time.Duration, bool) {
	d, stop := r.fallback.next(s)
	if stop {
		return 0, true
	}
	if hint, ok := retryAfterHint(s); ok {
		return min(hint, r.max), false
	}
	return d, false
}

func (r *retryAfter) usesClock() bool { return r.fallback.usesClock() }

func (r *retryAfter) bounds(s State) (lo, hi time.Duration) {
	if hint, ok := retryAfterHint(s); ok {
		d := min(hint, r.max)
		return d, d
	}
	return r.fallback.Bounds(s)
}

// start gives the wait its own per-call fallback when the fallback keeps
// state, as the backoff adapter does.
func (r *retryAfter) start() waiter {
	if r.fallback.w == nil {
		return nil
	}
	fw := r.fallback.w.start()
	if fw == nil {
		return nil
	}
	return &retryAfter{fallback: Wait{fw}, max: r.max}
}

func (r *retryAfter) String() string {
	return fmt.Sprintf("WaitRetryAfter(%v, max=%v)", r.fallback, r.max)
}

// retryAfterHint returns the wait that the Retry-After header of s's outcome
// asks for, and whether there is a usable one.
func retryAfterHint(s State) (time.Duration, bool) {
	h := outcomeHeader(s)
	if h == nil {
		return 0, false
	}
	return parseRetryAfter(h.Get("Retry-After"), time.Now())
}

// outcomeHeader returns the response header an outcome carries, if any.
func outcomeHeader(s State) http.Header {
	if r, ok := s.Value.(*http.Response); ok && r != nil {
		return r.Header
	}
	if s.Err == nil {
		return nil
	}
	if se, ok := asInTree[*StatusError](s.Err); ok && se.Header != nil {
		return se.Header
	}
	if re, ok := asInTree[*RetryError](s.Err); ok {
		if r, ok := re.Value.(*http.Response); ok && r != nil {
			return r.Header
		}
	}
	return nil
}

// parseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) at
// time now. Delta-seconds too large for a Duration saturate.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(maxWait/time.Second) { // only a range error is possible
			return maxWait, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
