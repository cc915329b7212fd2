package retries

// PLACEHOLDER: a fixed-concurrency stand-in with the agreed API, to be
// replaced by the adaptive limiter. Not documented as final.

import (
	"context"
	"fmt"
	"sync"
)

// Signal is what an attempt tells a [Limiter] about the server when its
// [Permit] is released.
type Signal uint8

const (
	// SignalIgnore says the attempt taught nothing about the server's
	// capacity (its context ended, or it failed before reaching it).
	SignalIgnore Signal = iota
	// SignalSuccess says the server answered.
	SignalSuccess
	// SignalBackpressure says the server asked the client to slow down: a
	// 429, a 503 with Retry-After, or what LimiterConfig.Backpressure
	// matches.
	SignalBackpressure
	// SignalFailure says the attempt failed in a way that is retried but
	// is not backpressure (a 503, a reset connection).
	SignalFailure
)

// LimiterConfig configures a [Limiter]. The zero value is usable.
type LimiterConfig struct {
	// MaxInFlight caps the attempts in flight. Zero means 256.
	MaxInFlight int
	// Backpressure matches the outcomes that ask the client to slow down.
	// The zero Predicate means a 429, or a 503 with a Retry-After header.
	Backpressure Predicate
}

// Limiter is an adaptive limiter shared by many calls.
type Limiter struct {
	cfg     LimiterConfig
	mu      sync.Mutex
	limit   int
	inUse   int
	waiters []chan struct{}
	stats   LimiterStats
}

// LimiterStats is a snapshot of a [Limiter].
type LimiterStats struct {
	// Limit is the current limit on attempts in flight.
	Limit float64
	// Rate is the current limit on attempts per second; 0 means none.
	Rate float64
	// InFlight is the number of permits held; Waiting the number of calls
	// waiting for one.
	InFlight, Waiting int
	// Successes, Throttles and Failures count the released permits by
	// Signal.
	Successes, Throttles, Failures int64
}

// NewLimiter returns a Limiter configured by c.
func NewLimiter(c LimiterConfig) *Limiter {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	return &Limiter{cfg: c, limit: c.MaxInFlight}
}

// Permit is the permission to make one attempt.
type Permit struct{ l *Limiter }

// Acquire blocks until an attempt may start or ctx ends.
func (l *Limiter) Acquire(ctx context.Context) (Permit, error) {
	l.mu.Lock()
	if l.inUse < l.limit && len(l.waiters) == 0 {
		l.inUse++
		l.mu.Unlock()
		return Permit{l}, nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return Permit{l}, nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				l.mu.Unlock()
				return Permit{}, ctx.Err()
			}
		}
		l.mu.Unlock()
		Permit{l}.Release(SignalIgnore) // granted as ctx ended: hand it on
		return Permit{}, ctx.Err()
	}
}

// Release ends the attempt and reports s.
func (p Permit) Release(s Signal) {
	l := p.l
	if l == nil {
		return
	}
	l.mu.Lock()
	switch s {
	case SignalSuccess:
		l.stats.Successes++
	case SignalBackpressure:
		l.stats.Throttles++
	case SignalFailure:
		l.stats.Failures++
	}
	if len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(ch)
	} else {
		l.inUse--
	}
	l.mu.Unlock()
}

// Stats returns a snapshot of l.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Limit, s.InFlight, s.Waiting = float64(l.limit), l.inUse, len(l.waiters)
	return s
}

// String describes l's state.
func (l *Limiter) String() string {
	s := l.Stats()
	return fmt.Sprintf("Limiter(limit=%g, in flight=%d, waiting=%d)", s.Limit, s.InFlight, s.Waiting)
}

// backpressure reports whether an outcome asks the client to slow down.
func (l *Limiter) backpressure(v any, err error) bool {
	if l.cfg.Backpressure.p != nil {
		return l.cfg.Backpressure.match(v, err)
	}
	return defaultBackpressure(v, err)
}

// defaultBackpressure matches a 429, or a 503 with a Retry-After header.
func defaultBackpressure(v any, err error) bool {
	code, ok := statusOf(v, err)
	if !ok {
		return false
	}
	switch code {
	case 429:
		return true
	case 503:
		h := outcomeHeader(State{Value: v, Err: err})
		return h != nil && h.Get("Retry-After") != ""
	}
	return false
}

// WithLimiter attaches l to the policy: every attempt acquires a permit
// from l first and releases it with what its outcome says about the server.
// Copies share l; a nil l removes it.
func WithLimiter(l *Limiter) Option { return func(p *Policy) { p.limiter = l } }
