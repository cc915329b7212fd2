package feed

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestStatsPauses: Stats reports the client's pauses as they happen: the
// one on now counted, with its time so far, and then its whole time.
func TestStatsPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{URL: "http://127.0.0.1:1", Progress: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.pause.begin(time.Now(), 0, nil)
		time.Sleep(2 * time.Second)
		if s := c.Stats(); s.Pauses != 1 || s.Paused != 2*time.Second || !s.PausedNow {
			t.Errorf("during the pause: Stats() = %+v; want 1 pause, 2 s so far, on", s)
		}
		time.Sleep(time.Second)
		c.pause.end(time.Now())
		time.Sleep(time.Second)
		if s := c.Stats(); s.Pauses != 1 || s.Paused != 3*time.Second || s.PausedNow {
			t.Errorf("after it: Stats() = %+v; want 1 pause of 3 s, off", s)
		}
	})
}
