package control_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed32e55400/retries/control"
	"github.com/seed32e55400/retries/control/controltest"
)

// pkg is a package with services.xml at its root.
func pkg(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, _ := w.Create("services.xml")
	f.Write([]byte("<services/>"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// cluster returns a stand-in with two containers, a content node and a
// distributor, deployed at generation 1.
func cluster() *controltest.Server {
	s := &controltest.Server{Services: []controltest.Service{
		{Type: "container", Cluster: "default", Host: "c1.test", Port: 8080, Lag: 800 * time.Millisecond, Initializing: 300 * time.Millisecond},
		{Type: "container", Cluster: "default", Host: "c2.test", Port: 8080, Lag: 1200 * time.Millisecond},
		{Type: "searchnode", Cluster: "music", Host: "n1.test", Port: 19107, Lag: 500 * time.Millisecond},
		{Type: "distributor", Cluster: "music", Host: "n1.test", Port: 19111, Lag: 200 * time.Millisecond},
	}}
	s.Deployed(1)
	return s
}

func client(t *testing.T, s *controltest.Server) *control.Client {
	t.Helper()
	c, err := control.New(control.Config{URL: s.URL(), Transport: s.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// deployAndWait deploys and waits, and returns how long after the stand-in
// had the generation done the wait returned.
func deployAndWait(t *testing.T, c *control.Client, s *controltest.Server, p []byte) (*control.Deployment, *control.State, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d, err := c.Deploy(ctx, p)
	if err != nil {
		return d, nil, 0, err
	}
	st, err := c.Wait(ctx, d.Generation, d.Restart)
	return d, st, time.Since(s.Counts().DoneAt), err
}

// TestDeployOnce: ten deploys whose services converge after 0.2-3 s each:
// one POST each, each a new generation, and the wait returns after the
// last service is done (never before), 400 ms after it at most in the
// median and 2 s at worst; `vespa deploy --wait` polls every 2 s.
func TestDeployOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		c := client(t, s)
		var lates []time.Duration
		for i := range 10 {
			s.Services[0].Lag = time.Duration(i) * 300 * time.Millisecond
			s.Services[1].Lag = 3*time.Second - time.Duration(i)*250*time.Millisecond
			d, st, late, err := deployAndWait(t, c, s, pkg(t))
			if err != nil {
				t.Fatalf("deploy %d: %v", i, err)
			}
			if d.Generation != int64(i+2) || d.Previous != int64(i+1) || d.Posts != 1 || d.Adopted || d.Activated {
				t.Errorf("deploy %d: %+v, want generation %d after %d, one POST", i, d, i+2, i+1)
			}
			if late < 0 || len(st.Behind()) != 0 {
				t.Errorf("deploy %d: returned %v after done, behind %v", i, late, st.Behind())
			}
			lates = append(lates, late)
		}
		slices.Sort(lates)
		if med, worst := lates[len(lates)/2], lates[len(lates)-1]; med > 400*time.Millisecond || worst > 2*time.Second {
			t.Errorf("returned after the last service was done by %v: median %v, worst %v; want ≤ 400 ms, ≤ 2 s", lates, med, worst)
		}
		if n := s.Counts().Posts; n != 10 {
			t.Errorf("%d POSTs, want 10", n)
		}
		t.Logf("returned after done by %v", lates)
	})
}

// TestLostAnswers: an answer lost after the config server committed the
// package is one new generation, adopted with no second POST; one lost
// before is posted again, and activated once.
func TestLostAnswers(t *testing.T) {
	for _, c := range []struct {
		fault   controltest.Fault
		posts   int
		adopted bool
	}{{controltest.LostAfterCommit, 1, true}, {controltest.LostBeforeCommit, 2, false}} {
		synctest.Test(t, func(t *testing.T) {
			s := cluster()
			s.Posts = []controltest.Fault{c.fault}
			d, _, _, err := deployAndWait(t, client(t, s), s, pkg(t))
			if err != nil {
				t.Fatal(err)
			}
			if d.Posts != c.posts || d.Adopted != c.adopted || d.Generation != 2 {
				t.Errorf("fault %d: %+v, want %d POSTs, adopted %v, generation 2", c.fault, d, c.posts, c.adopted)
			}
			if got := s.Counts(); got.Posts != c.posts || !slices.Equal(got.Activations, []int64{2}) {
				t.Errorf("fault %d: the config server saw %d POSTs and activations %v, want %d and [2]", c.fault, got.Posts, got.Activations, c.posts)
			}
		})
	}
}

// TestNotActivated: a 200 whose session was prepared but not activated,
// then 409 ACTIVATION_CONFLICT three times on the activation: the session
// is activated by a fourth PUT, with no second POST, and serves.
func TestNotActivated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		s.Posts, s.ActivateConflicts = []controltest.Fault{controltest.NotActivated}, 3
		d, _, _, err := deployAndWait(t, client(t, s), s, pkg(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Counts(); !d.Activated || d.Posts != 1 || got.Puts != 4 || !slices.Equal(got.Activations, []int64{2}) {
			t.Errorf("%+v; the config server saw %d PUTs and activations %v; want activated by the 4th PUT, one POST, [2]", d, got.Puts, got.Activations)
		}
	})
}

// TestRefusals: an invalid package and refused credentials are posted
// once and fail with the config server's error; a conflict that passes is
// posted again.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		fault  controltest.Fault
		status int
		code   string
		posts  int
	}{
		{controltest.Invalid, 400, "INVALID_APPLICATION_PACKAGE", 1},
		{controltest.Unauthorized, 401, "", 1},
		{controltest.Conflict, 0, "", 2},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := cluster()
			s.Posts = []controltest.Fault{c.fault}
			_, _, _, err := deployAndWait(t, client(t, s), s, pkg(t))
			var e *control.Error
			switch {
			case c.status == 0 && err != nil:
				t.Errorf("fault %d: %v, want it deployed", c.fault, err)
			case c.status != 0 && (!errors.As(err, &e) || e.Status != c.status || e.Code != c.code):
				t.Errorf("fault %d: %v, want a %d %s", c.fault, err, c.status, c.code)
			}
			if n := s.Counts().Posts; n != c.posts {
				t.Errorf("fault %d: %d POSTs, want %d", c.fault, n, c.posts)
			}
		})
	}
}

// TestConfigFailure: a container that fails to apply the new generation
// ends the wait within a poll of its failure, naming it and the message;
// `vespa deploy --wait` and pyvespa wait out their whole timeout.
func TestConfigFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		s.Services[1].Fail = "Could not construct component 'model': the file is empty"
		start := time.Now()
		_, _, _, err := deployAndWait(t, client(t, s), s, pkg(t))
		var ce *control.ConfigError
		if !errors.As(err, &ce) || ce.Service.Host != "c2.test" || ce.Service.Failed != s.Services[1].Fail {
			t.Fatalf("%v, want a *ConfigError naming c2.test and its message", err)
		}
		if late := time.Since(s.Counts().FailedAt); late < 0 || late > time.Second {
			t.Errorf("ended %v after the failure showed (%v after the start), want within a poll", late, time.Since(start))
		}
	})
}

// TestConfigServerDown: a config server that refuses connections for 3 s
// and then answers 503 for 3 s more is ridden out within the deadline,
// with a bounded number of requests, and the package is posted once.
func TestConfigServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		s.Refuse, s.Unavailable = time.Now().Add(3*time.Second), time.Now().Add(6*time.Second)
		d, _, _, err := deployAndWait(t, client(t, s), s, pkg(t))
		if err != nil {
			t.Fatal(err)
		}
		got := s.Counts()
		if d.Posts != 1 || got.Posts != 1 || got.Refused == 0 || got.Unavailable == 0 || got.Refused+got.Unavailable > 6 {
			t.Errorf("%+v; the config server saw %+v; want one POST, and at most 6 requests refused or answered 503", d, got)
		}
		t.Logf("%d refused, %d answered 503", got.Refused, got.Unavailable)
	})
}

// TestRestartPending: a container that applies the change only on restart
// ends the wait with a *RestartError once the rest are done, naming it:
// from the deployment's restart actions, and without them (a wait of its
// own) from the container's applyOnRestart.
func TestRestartPending(t *testing.T) {
	for _, own := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := cluster()
			s.Services[0].Restart = true
			c := client(t, s)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			d, err := c.Deploy(ctx, pkg(t))
			if err != nil {
				t.Fatal(err)
			}
			restart := d.Restart
			if own {
				restart = nil
			}
			_, err = c.Wait(ctx, d.Generation, restart)
			var re *control.RestartError
			if !errors.As(err, &re) || len(re.Services) != 1 || re.Services[0].Host != "c1.test" {
				t.Fatalf("own wait %v: %v, want a *RestartError naming c1.test", own, err)
			}
			if late := time.Since(s.Counts().DoneAt); late < 0 || late > 1500*time.Millisecond {
				t.Errorf("own wait %v: returned %v after the rest were done, want within a poll or two", own, late)
			}
		})
	}
}

// TestBehind: a container that lags past the deadline ends the wait at
// the deadline with a *BehindError naming it.
func TestBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		s.Services[1].Lag = time.Hour
		c := client(t, s)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		d, err := c.Deploy(ctx, pkg(t))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Wait(ctx, d.Generation, nil)
		var be *control.BehindError
		if !errors.As(err, &be) || !errors.Is(err, context.DeadlineExceeded) || len(be.Behind) != 1 || be.Behind[0].Host != "c2.test" {
			t.Fatalf("%v, want a *BehindError naming c2.test", err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("ended %v after it began, past the deadline", took)
		}
	})
}

// TestThroughTheProxy: containers whose hosts cannot be reached from the
// client are read through the config server's proxy, and the wait ends
// healthy (vespa#31373: `vespa deploy --wait` dials 127.0.0.1).
func TestThroughTheProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cluster()
		s.Services[0].ProxyOnly, s.Services[1].ProxyOnly = true, true
		_, st, _, err := deployAndWait(t, client(t, s), s, pkg(t))
		if err != nil {
			t.Fatal(err)
		}
		if s.Counts().Proxied == 0 || !st.Services[0].Proxied || st.Services[0].Health != "up" {
			t.Errorf("proxied %d, %+v: want the containers read through the proxy, up", s.Counts().Proxied, st.Services[0])
		}
	})
}

// TestRetryable is the classification, row by row.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&control.Error{Status: 400, Code: "INVALID_APPLICATION_PACKAGE"}, false},
		{&control.Error{Status: 400, Code: "BAD_REQUEST"}, false},
		{&control.Error{Status: 401}, false},
		{&control.Error{Status: 403}, false},
		{&control.Error{Status: 404, Code: "NOT_FOUND"}, false},
		{&control.Error{Status: 405, Code: "METHOD_NOT_ALLOWED"}, false},
		{&control.Error{Status: 408, Code: "REQUEST_TIMEOUT"}, true},
		{&control.Error{Status: 409, Code: "ACTIVATION_CONFLICT"}, true},
		{&control.Error{Status: 409, Code: "APPLICATION_LOCK_FAILURE"}, true},
		{&control.Error{Status: 409, Code: "PARENT_HOST_NOT_READY"}, true},
		{&control.Error{Status: 409, Code: "CERTIFICATE_NOT_READY"}, true},
		{&control.Error{Status: 409, Code: "LOAD_BALANCER_NOT_READY"}, true},
		{&control.Error{Status: 409, Code: "CONFIG_NOT_CONVERGED"}, true},
		{&control.Error{Status: 409, Code: "REQUESTED_NODES_MISSING"}, false},
		{&control.Error{Status: 412, Code: "PRECONDITION_FAILED"}, false},
		{&control.Error{Status: 500, Code: "INTERNAL_SERVER_ERROR"}, true},
		{&control.Error{Status: 502}, true},
		{&control.Error{Status: 503}, true},
		{&control.Error{Status: 504}, true},
		{errors.New("connection reset by peer"), true},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	} {
		if got := control.Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestNewRefusesAPath: a config server's URL with a path would put it
// before every call's.
func TestNewRefusesAPath(t *testing.T) {
	for _, u := range []string{"http://cfg:19071/application/v2", "ftp://cfg", "cfg:19071"} {
		if _, err := control.New(control.Config{URL: u}); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
	if _, err := control.New(control.Config{URL: "https://cfg:19071/"}); err != nil {
		t.Errorf("New with a root URL: %v", err)
	}
	_ = http.StatusOK
}

// TestWaitForAGenerationNotActive: a wait for a generation the config
// server has not activated is not done, even when no service is listed
// behind it (an application of no service, here): it ends at the deadline.
func TestWaitForAGenerationNotActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &controltest.Server{}
		s.Deployed(3)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := client(t, s).Wait(ctx, 4, nil)
		var be *control.BehindError
		if !errors.As(err, &be) || st == nil || st.Wanted != 3 {
			t.Errorf("Wait for 4 with 3 active: %+v, %v; want a *BehindError", st, err)
		}
	})
}
