package retries

import "time"

// The seven retry policies of pyvespa's vespa.retries module (at commit
// 200c7655), with exactly its numbers. In the formulas, n is the number of
// the attempt that just failed, from 1.
//
// They are values to derive from with [Policy.Copy]. Tests may replace one
// (retries.DocV1 = retries.DocV1.Copy(retries.WithWait(retries.WaitNone()))),
// as pyvespa's tests patch its module constants, but a program should leave
// them alone: every call site reads them when it calls Do.
var (
	// Query is pyvespa's QUERY_RETRY, the default for queries: up to 5
	// attempts, retrying any error (statuses are not inspected), with full
	// jitter U(0, min(60 s, 1.5 s × 2^(n−1))) between attempts: bounds 1.5 s,
	// 3 s, 6 s, 12 s, so at most 22.5 s and on average 11.25 s of waiting.
	// On giving up it returns a *RetryError.
	Query Policy = New(
		WithName("Query"),
		WithStop(StopAfterAttempt(5)),
		WithWait(WaitRandomExponential(Exponential{Multiplier: 1500 * time.Millisecond, Max: 60 * time.Second})),
		WithRetry(RetryIfAnyError()),
	)

	// DocV1 is pyvespa's DOCV1_RETRY, the outer layer of a document/v1
	// operation (feed, get, update, delete) around [Throttle]: up to 3
	// attempts, retrying any error or a 503 response, waiting 1 s × 2^(n−1)
	// with no cap (so exactly 1 s, then 2 s). On giving up it returns the
	// last outcome: the last 503 response with a nil error, or the last
	// error itself, never a *RetryError.
	DocV1 Policy = New(
		WithName("DocV1"),
		WithStop(StopAfterAttempt(3)),
		WithWait(WaitExponential(Exponential{Multiplier: time.Second})),
		WithRetry(RetryAny(RetryIfAnyError(), RetryIfStatus(503))),
		WithOnExhausted(ReturnLastOutcome),
	)

	// Throttle is pyvespa's THROTTLE_RETRY, the inner layer of a document/v1
	// operation: it retries a 429 response (or a *StatusError with status
	// 429) and nothing else, and never gives up, so that sustained
	// backpressure slows a feed down instead of failing it. It waits
	// U(0, min(10 s, 1 s × 2^(n−1))): bounds 1 s, 2 s, 4 s, 8 s, then 10 s
	// for every later attempt, however many. Only the context ends it.
	Throttle Policy = New(
		WithName("Throttle"),
		WithStop(StopNever()),
		WithWait(WaitRandomExponential(Exponential{Multiplier: time.Second, Max: 10 * time.Second})),
		WithRetry(RetryIfStatus(429)),
	)

	// SyncRequest is pyvespa's SYNC_REQUEST_RETRY, used by every
	// synchronous data-plane request: up to 11 attempts (10 retries),
	// retrying a connection error ([IsConnectionError]) or a 429 response,
	// waiting 0.1 s × 1.618^(n−1) + U(0, 1 s) ([WaitGoldenJitter]): 10 waits
	// of 19.7356 s in total plus up to 10 s of jitter. On giving up it
	// returns the last outcome, like DocV1. pyvespa replaces the stop per
	// client with StopAfterAttempt(num_retries_429 + 1).
	SyncRequest Policy = New(
		WithName("SyncRequest"),
		WithStop(StopAfterAttempt(11)),
		WithWait(WaitGoldenJitter()),
		WithRetry(RetryAny(RetryIfError(IsConnectionError), RetryIfStatus(429))),
		WithOnExhausted(ReturnLastOutcome),
	)

	// Visit is pyvespa's VISIT_RETRY, around each page request of a visit:
	// up to 3 attempts with no wait, retrying only a *StatusError (what
	// [CheckStatus] returns for a 4xx or 5xx response). On giving up it
	// returns a *RetryError.
	Visit Policy = New(
		WithName("Visit"),
		WithStop(StopAfterAttempt(3)),
		WithRetry(RetryIfErrorAs[*StatusError]()),
	)

	// ControlPlane is pyvespa's CONTROL_PLANE_RETRY, for Vespa Cloud
	// control-plane calls: up to 3 attempts, retrying any error, waiting
	// min(3 s, 1 s × 2^(n−1)) (so 1 s, then 2 s). On giving up it returns
	// the last error itself.
	ControlPlane Policy = New(
		WithName("ControlPlane"),
		WithStop(StopAfterAttempt(3)),
		WithWait(WaitExponential(Exponential{Multiplier: time.Second, Max: 3 * time.Second})),
		WithRetry(RetryIfAnyError()),
		WithReraise(true),
	)

	// URLValidation is pyvespa's URL_VALIDATION_RETRY, for checking model
	// URLs: up to 3 attempts, retrying any error, waiting 1 s × 2^(n−1)
	// clamped to [1 s, 10 s] (so 1 s, then 2 s). On giving up it returns the
	// last error itself.
	URLValidation Policy = New(
		WithName("URLValidation"),
		WithStop(StopAfterAttempt(3)),
		WithWait(WaitExponential(Exponential{Multiplier: time.Second, Min: time.Second, Max: 10 * time.Second})),
		WithRetry(RetryIfAnyError()),
		WithReraise(true),
	)
)
