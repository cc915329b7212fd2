package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ConfigError is a service that failed to apply the generation waited
// for: a component that cannot be constructed, say. The container goes on
// serving the generation before; waiting longer does not help.
type ConfigError struct{ Service Service }

// Error names the service and says the config server's message.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("control: %s in cluster %s failed to apply the new generation: %s", e.Service.Type, e.Service.Cluster, e.Service.Failed)
}

// RestartError is a wait that ended with every service at the generation
// but Services, which apply it only when restarted: nothing restarts them
// on a self-hosted cluster but the operator.
type RestartError struct{ Services []Service }

// Error names the services that wait for a restart.
func (e *RestartError) Error() string {
	names := make([]string, len(e.Services))
	for i, s := range e.Services {
		names[i] = s.Type + " on " + s.Host
	}
	return "control: converged, but these services apply the change only when restarted: " + strings.Join(names, ", ")
}

// ErrNotDeployed is why Wait for the current generation of an
// application never deployed returns at once.
var ErrNotDeployed = errors.New("control: not deployed")

// BehindError is a wait whose context ended first: State is the last
// state read (nil if none was), Behind the services that were not done,
// Err the context's error.
type BehindError struct {
	State  *State
	Behind []Service
	Err    error
}

// Error names what is behind, with the context's error.
func (e *BehindError) Error() string {
	if e.State == nil {
		return fmt.Sprintf("control: %v before the config server answered", e.Err)
	}
	parts := make([]string, len(e.Behind))
	for i, s := range e.Behind {
		parts[i] = s.String()
	}
	return fmt.Sprintf("control: %v waiting for generation %d: %s", e.Err, e.State.Generation, strings.Join(parts, "; "))
}

// Unwrap returns the context's error.
func (e *BehindError) Unwrap() error { return e.Err }

// The wait's polls: the first a firstPoll after a change, then each
// growing by half up to maxPoll while nothing moves; up to maxFailPoll
// while the config server fails.
const (
	firstPoll   = 100 * time.Millisecond
	maxPoll     = time.Second
	maxFailPoll = 3 * time.Second
)

// Wait waits until generation g serves (g 0: the application's current
// generation): every service the config server lists at g or past it,
// and every container up on /state/v1/health, read once it runs g,
// directly or, when its host cannot be reached from here, through the
// config server's proxy. The services of restart (a Deployment's) are not
// waited for. It returns the last State read and:
//   - nil: converged and healthy;
//   - a *ConfigError at once when a service failed to apply g;
//   - a *RestartError when all but services that wait for a restart (of
//     restart, or a container whose /state/v1/config says applyOnRestart)
//     are done;
//   - a *BehindError when ctx ends first, naming what is behind;
//   - an *Error the config server answered that Retryable says no retry
//     mends (a 404 for an application that is not there, a 401).
//
// Polls start a short while apart, grow while nothing moves and start
// short again when a service moves: the wait returns within a short poll
// of the last service being done, and asks little of a config server whose
// services take minutes. A failing config server is polled less often.
func (c *Client) Wait(ctx context.Context, g int64, restart []Restart) (*State, error) {
	if g <= 0 {
		var err error
		if g, err = c.Generation(ctx); err != nil {
			return nil, wrapBehind(ctx, nil, err)
		}
		if g == 0 {
			return nil, fmt.Errorf("%w: tenant %s has no application %s deployed", ErrNotDeployed, c.cfg.Tenant, c.cfg.Application)
		}
	}
	routes := map[string]bool{} // a host whose containers are read through the proxy
	var last *State
	poll := firstPoll
	for {
		st, err := c.state(ctx, g)
		switch {
		case err != nil && ctx.Err() != nil:
			return last, wrapBehind(ctx, last, ctx.Err())
		case err != nil && !Retryable(err):
			return last, err
		case err != nil:
			c.again(err)
			poll = min(poll*2, maxFailPoll)
		default:
			for i := range st.Services {
				x := &st.Services[i]
				x.Restart = x.Generation < g && named(restart, *x) // one that moved needs no restart
			}
			for _, s := range st.Services {
				if s.Failed != "" {
					c.notify(last, st)
					return st, &ConfigError{Service: s}
				}
			}
			still := sameGenerations(last, st)
			c.look(ctx, st, last, still, routes)
			if same(last, st) {
				poll = min(poll*3/2, maxPoll)
			} else {
				poll = firstPoll
				c.notify(last, st)
			}
			last = st
			if len(st.Behind()) == 0 && st.Wanted >= g { // and the generation is active
				var r []Service
				for _, s := range st.Services {
					if s.Restart {
						r = append(r, s)
					}
				}
				if len(r) > 0 {
					return st, &RestartError{Services: r}
				}
				return st, nil
			}
		}
		if !sleep(ctx, poll) {
			return last, wrapBehind(ctx, last, ctx.Err())
		}
	}
}

// notify hands st to Config.OnState when it differs from last.
func (c *Client) notify(last, st *State) {
	if c.cfg.OnState != nil && !same(last, st) {
		c.cfg.OnState(st)
	}
}

// wrapBehind returns the *BehindError of a wait that ctx ended, or err.
func wrapBehind(ctx context.Context, last *State, err error) error {
	if ctx.Err() == nil {
		return err
	}
	var b []Service
	if last != nil {
		b = last.Behind()
	}
	return &BehindError{State: last, Behind: b, Err: ctx.Err()}
}

// named reports whether s is one of restart's services: the same host
// and type (the config server names no port).
func named(restart []Restart, s Service) bool {
	for _, r := range restart {
		if r.Host == s.Host && r.Type == s.Type {
			return true
		}
	}
	return false
}

// look reads what the convergence check does not say: the health of each
// container at the generation (its health as last read kept when up), and,
// when nothing moved since the poll before (still), whether a container
// behind waits for a restart.
func (c *Client) look(ctx context.Context, st, last *State, still bool, proxied map[string]bool) {
	for i := range st.Services {
		s := &st.Services[i]
		if s.Type != "container" || s.Restart {
			continue
		}
		var before *Service
		if last != nil && i < len(last.Services) && last.Services[i].Host == s.Host && last.Services[i].Port == s.Port {
			before = &last.Services[i]
		}
		switch {
		case s.Generation >= st.Generation && before != nil && before.Generation >= st.Generation && before.Health == "up":
			s.Health, s.Proxied = "up", before.Proxied
		case s.Generation >= st.Generation:
			var h struct {
				Status struct {
					Code string `json:"code"`
				} `json:"status"`
			}
			if c.read(ctx, *s, "health", &h, proxied) == nil {
				s.Health = h.Status.Code
			}
			s.Proxied = proxied[s.Host]
		case still:
			if before != nil && before.Restart {
				s.Restart = true
				continue
			}
			var cfg struct {
				Config struct {
					ApplyOnRestart bool `json:"applyOnRestart"`
				} `json:"config"`
			}
			if c.read(ctx, *s, "config", &cfg, proxied) == nil && cfg.Config.ApplyOnRestart {
				s.Restart = true
			}
		}
	}
}

// directDial bounds a read from a container itself: a host that drops
// what is sent to it (another network, a firewall) would otherwise hold
// the wait until its deadline. Past it, the proxy is asked.
const directDial = 2 * time.Second

// read reads a container's /state/v1/WHAT into out: from the container,
// or through the config server's proxy when its host cannot be reached
// from here (proxied remembers such hosts).
func (c *Client) read(ctx context.Context, s Service, what string, out any, proxied map[string]bool) error {
	if !proxied[s.Host] {
		direct := *c.base
		direct.User = nil // the config server's credentials stay with it
		direct.Host = net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
		direct.Path = "/state/v1/" + what
		dctx, cancel := context.WithTimeout(ctx, directDial)
		err := c.get(dctx, direct.String(), out)
		cancel()
		if err == nil || ctx.Err() != nil || !unsent(err) && dctx.Err() == nil {
			return err
		}
		proxied[s.Host] = true
	}
	return c.call(ctx, http.MethodGet, c.instance()+"/service/container/"+url.PathEscape(s.Host)+"/state/v1/"+what, nil, "", out)
}

// get reads a JSON document from u, which is not the config server's.
func (c *Client) get(ctx context.Context, u string, out any) error {
	return c.callURL(ctx, http.MethodGet, u, nil, "", out)
}
