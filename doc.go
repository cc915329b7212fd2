// Package retries calls a function again when it fails, following an
// immutable [Policy]: the Go counterpart of pyvespa's vespa.retries module.
//
// A Policy has a [Stop] that decides when to give up, a [Wait] that decides
// how long to pause between attempts, a [Predicate] that decides which
// outcomes are worth another attempt, a rule for what comes back when it
// gives up, and optional hooks. [Policy.Do] runs a function under a Policy,
// and [DoValue] does the same for a function that returns a value:
//
//	resp, err := retries.DoValue(ctx, retries.DocV1, func(ctx context.Context) (*http.Response, error) {
//		return http.DefaultClient.Do(req.WithContext(ctx))
//	})
//
// The seven policies of pyvespa are package variables with exactly its
// numbers: [Query], [DocV1], [Throttle], [SyncRequest], [Visit],
// [ControlPlane] and [URLValidation]. Policies are values: [Policy.Copy]
// returns a changed copy and leaves the original alone, so they can be shared
// and adapted:
//
//	p := retries.SyncRequest.Copy(retries.WithStop(retries.StopAfterAttempt(4)))
//
// [NewTransport] runs every request of an [http.Client] under a Policy, and
// [WaitRetryAfter] honours a server's Retry-After header.
//
// Under overload, two shared objects keep clients from making it worse: a
// [Budget] ([WithBudget]) caps retries as a share of the traffic, and a
// [Limiter] ([WithLimiter]) learns how much a server can take from its 429s
// and latency and paces attempts to that ([HandPermit] lets a dispatcher
// wait for it once for many calls). A [Breaker] ([WithBreaker]) stops
// attempts to a server that has gone away and probes until it is back.
//
// An [Observer] ([WithObserver]) sees every call start, attempt, wait, be
// refused or held, and end; the module github.com/seed32e55400/retries/otelretries
// turns those events into OpenTelemetry metrics and spans.
//
// A Policy is safe for concurrent use by multiple goroutines: each call to
// Do keeps its own state.
//
// # Errors
//
// What Do returns when it gives up depends on the policy, as in tenacity: a
// [*RetryError] that wraps the last attempt's error (the default, [Query],
// [Visit]), the last error itself ([WithReraise]: [ControlPlane],
// [URLValidation]), or whatever a callback makes of the last outcome
// ([WithOnExhausted] with [ReturnLastOutcome]: [DocV1], [SyncRequest]). An
// error that is not retried comes back at once, unwrapped. When the context
// ends the call, the error is a *RetryError that matches, with [errors.Is],
// both the context's error and the last attempt's error.
//
// # Differences from pyvespa
//
// Do never retries once the caller's context is done, so a cancellation is
// never swallowed; it never sleeps past the context's deadline; and waits
// saturate instead of overflowing. [IsConnectionError] classifies errors by
// type, not by message. docs/design.md in the repository lists every
// difference.
package retries
