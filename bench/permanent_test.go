package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"

	backoffv5 "github.com/cenkalti/backoff/v5"
	"github.com/seed32e55400/retries"
)

var errPermanent = errors.New("stop")

// TestPermanentFromBackoffV5 checks that Do recognises backoff v5's
// Permanent, whose type differs from v4's, so that code written for v5 does
// not have its permanent errors retried.
func TestPermanentFromBackoffV5(t *testing.T) {
	for name, err := range map[string]error{
		"v5 Permanent":         backoffv5.Permanent(errPermanent),
		"wrapped v5 Permanent": fmt.Errorf("call: %w", backoffv5.Permanent(errPermanent)),
		"joined v5 Permanent":  errors.Join(errors.New("other"), backoffv5.Permanent(errPermanent)),
	} {
		calls := 0
		got := retries.Query.Do(context.Background(), func(context.Context) error { calls++; return err })
		if calls != 1 || got != errPermanent {
			t.Errorf("%s: Do() = %v after %d calls, want the inner error after 1", name, got, calls)
		}
	}
}
