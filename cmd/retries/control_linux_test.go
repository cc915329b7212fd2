package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed32e55400/retries/control/controltest"
)

// TestDeployInterruptedBySignal: the process deploying, then waiting for
// a container that lags an hour, ends with exit 3 on one SIGINT or
// SIGTERM, at once, saying it was interrupted and where the services were.
func TestDeployInterruptedBySignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		s := standIn(t, func(s *controltest.Server) { s.Services[1].Lag = time.Hour })
		p := startCommand(t, "deploy", "-url", s.URL(), appDir(t))
		p.waitLine(t, "services done")
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != exitInterrupted || !strings.Contains(p.errText(), "retries deploy: interrupted: ") ||
			!strings.Contains(p.errText(), "container on 127.0.0.") {
			t.Errorf("%v: exit %d, want %d, saying what is behind; stderr:\n%s", sig, code, exitInterrupted, p.errText())
		}
	}
}
