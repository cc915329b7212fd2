package retries

import (
	"context"
	"log/slog"
)

// LogRetries returns a hook for [WithBeforeSleep] that logs every retry to
// l at level, with the attempt number, the elapsed time, the coming wait
// and the attempt's error (or the type and status of its retried value).
// A nil l means slog.Default().
//
//	p := retries.DocV1.Copy(retries.WithBeforeSleep(retries.LogRetries(logger, slog.LevelWarn)))
func LogRetries(l *slog.Logger, level slog.Level) func(State) {
	return func(s State) {
		logger := l
		if logger == nil {
			logger = slog.Default()
		}
		ctx := context.Background()
		if !logger.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{
			slog.Int("attempt", s.Attempt),
			slog.Duration("elapsed", s.Elapsed),
			slog.Duration("wait", s.Wait),
		}
		if s.Err != nil {
			attrs = append(attrs, slog.String("error", s.Err.Error()))
		} else if s.Value != nil {
			attrs = append(attrs, slog.String("value", describeValue(s.Value)))
		}
		logger.LogAttrs(ctx, level, "retries: retrying", attrs...)
	}
}
