package feed

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// ended is an owner of a deadline that records when and why it ended.
type ended struct {
	start time.Time
	mu    sync.Mutex
	at    time.Duration
	cause error
	n     int
}

func (e *ended) expire(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at, e.cause = time.Since(e.start), cause
	e.n++
}

// get returns how many times e ended, and when and why it last did.
func (e *ended) get() (int, time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n, e.at, e.cause
}

var errTest = errors.New("test timeout")

// TestTimeoutsSkipHolds: a timeout counts the time the queue is not held
// (the feed not paused) only.
func TestTimeoutsSkipHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &timeouts{timeout: time.Second, cause: errTest}
		run := func(name string, want time.Duration, during func()) {
			t.Helper()
			var d deadline
			e := &ended{start: time.Now()}
			q.track(&d, e)
			during()
			time.Sleep(10 * time.Second)
			if n, at, cause := e.get(); n != 1 || cause != errTest || at != want {
				t.Errorf("%s: ended %d times, at %v with %v; want once at %v with errTest", name, n, at, cause, want)
			}
		}
		run("no hold", time.Second, func() {})
		run("held from 0.5 s to 3 s, while the timer runs out", 3500*time.Millisecond, func() {
			time.AfterFunc(500*time.Millisecond, func() { q.hold(time.Now()) })
			time.AfterFunc(3*time.Second, func() { q.release(time.Now()) })
		})
		run("held from 0.2 s to 0.4 s, before it runs out", 1200*time.Millisecond, func() {
			time.AfterFunc(200*time.Millisecond, func() { q.hold(time.Now()) })
			time.AfterFunc(400*time.Millisecond, func() { q.release(time.Now()) })
		})
		// Tracked 1.5 s into a hold that lasts 2 s: the hold counts from
		// the start only, so it ends 1.5 s after it started.
		q.hold(time.Now())
		time.Sleep(1500 * time.Millisecond)
		run("started during a hold", 1500*time.Millisecond, func() {
			time.AfterFunc(500*time.Millisecond, func() { q.release(time.Now()) })
		})
		// Untracked before its timeout: never ended.
		var d deadline
		e := &ended{start: time.Now()}
		q.track(&d, e)
		q.untrack(&d)
		time.Sleep(2 * time.Second)
		if n, _, cause := e.get(); n != 0 {
			t.Errorf("an untracked deadline ended with %v", cause)
		}
	})
}

// TestTimeoutsQueue: the deadlines share one queue and one timer: each
// ends its own timeout after its start, in the order they were tracked,
// whichever of them are untracked on the way, across a hold that moves the
// later deadlines by what is left of it after their start.
func TestTimeoutsQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := &timeouts{timeout: time.Second, cause: errTest}
		start := time.Now()
		ds := make([]deadline, 6)
		es := make([]*ended, 6)
		for i := range ds {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			es[i] = &ended{start: start}
			q.track(&ds[i], es[i])
		}
		// Tracked at 0, 0.1, … 0.5 s. Untracked: the first at 0.5 s, the
		// fourth at 0.9 s (both before their timeout). Held from 1.15 s to
		// 1.45 s: the second (due at 1.1 s) is not touched by it, the
		// third (1.2 s) ends at 1.5 s, the fifth and sixth 0.3 s late.
		q.untrack(&ds[0])
		time.AfterFunc(400*time.Millisecond, func() { q.untrack(&ds[3]) })
		time.AfterFunc(650*time.Millisecond, func() { q.hold(time.Now()) })
		time.AfterFunc(950*time.Millisecond, func() { q.release(time.Now()) })
		time.Sleep(5 * time.Second)
		want := []time.Duration{0, 1100 * time.Millisecond, 1500 * time.Millisecond, 0, 1700 * time.Millisecond, 1800 * time.Millisecond}
		for i, e := range es {
			n := 1
			if want[i] == 0 {
				n = 0
			}
			if got, at, _ := e.get(); got != n || at != want[i] {
				t.Errorf("deadline %d ended %d times, at %v; want %d at %v", i, got, at, n, want[i])
			}
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.first != nil || q.last != nil {
			t.Error("the queue is not empty")
		}
	})
}
