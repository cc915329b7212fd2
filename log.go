package retries

import (
	"context"
	"log/slog"
)

// LogRetries returns a hook for [WithBeforeSleep] that logs every retry to
// l at level, with the policy's name (if it has one, so that two layers
// can be told apart), the attempt number, the elapsed time, the coming wait
// and the attempt's error (or the type and status of its retried value),
// and, under a [Transport], the request's method and redacted URL.
// A nil l means slog.Default(). It logs with the call's context, so a
// handler that reads values from it (a trace id, say) sees them.
//
//	p := retries.DocV1.Copy(retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelWarn)))
func LogRetries(l *slog.Logger, level slog.Level) func(context.Context, State) {
	return func(ctx context.Context, s State) {
		logger := l
		if logger == nil {
			logger = slog.Default()
		}
		if !logger.Enabled(ctx, level) {
			return
		}
		attrs := make([]slog.Attr, 0, 8)
		if s.Policy != "" {
			attrs = append(attrs, slog.String("policy", s.Policy))
		}
		attrs = append(attrs,
			slog.Int("attempt", s.Attempt),
			slog.Duration("elapsed", s.Elapsed),
			slog.Duration("wait", s.Wait),
		)
		if method, url, ok := TransportRequest(ctx); ok {
			attrs = append(attrs, slog.String("method", method), slog.String("url", url))
		}
		if s.Err != nil {
			attrs = append(attrs, slog.String("error", s.Err.Error()))
		} else if s.Value != nil {
			attrs = append(attrs, slog.String("value", describeValue(s.Value)))
		}
		logger.LogAttrs(ctx, level, "retries: retrying", attrs...)
	}
}
