package control

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is the services of the application and where each is: its
// generation, a failure to apply the wanted one, a container's health.
type State struct {
	// Generation is the generation waited for; Wanted the application's,
	// as the config server says (at or past Generation once it is
	// active); Current the lowest of the services'.
	Generation, Wanted, Current int64
	Services                    []Service
}

// Service is one service of the application, as the config server's
// convergence check lists it.
type Service struct {
	Cluster, Host, Type string // "container", "searchnode", "distributor", …
	Port                int    // its state port (a container's HTTP port)
	// Generation is the one it runs, -1 when it did not answer the
	// config server or failed to apply the wanted one (Failed says why).
	Generation int64
	Failed     string
	// Health is a container's /state/v1/health status code ("up",
	// "initializing", "down"), read once it runs the generation waited
	// for; "" when not read. Proxied says it was read through the config
	// server's proxy: the host could not be reached from here.
	Health  string
	Proxied bool
	// Restart says the service applies the generation only when
	// restarted: named by the deployment's restart actions, or a
	// container whose /state/v1/config says applyOnRestart.
	Restart bool
}

// String describes the service as "container on HOST:PORT at generation
// G, wanted W" and its health or failure.
func (s Service) String() string {
	at := "no generation"
	if s.Generation >= 0 {
		at = "generation " + strconv.FormatInt(s.Generation, 10)
	}
	out := fmt.Sprintf("%s on %s:%d at %s", s.Type, s.Host, s.Port, at)
	switch {
	case s.Failed != "":
		out += ": failed: " + s.Failed
	case s.Restart:
		out += ": waits for a restart"
	case s.Health != "" && s.Health != "up":
		out += ": " + s.Health
	}
	return out
}

// done reports whether s is where the wait wants it: at the generation,
// and up if it is a container.
func (s Service) done(g int64) bool {
	return s.Generation >= g && (s.Type != "container" || s.Health == "up")
}

// Behind returns the services not yet done: below the generation, or a
// container not yet up, those waiting for a restart left out.
func (st *State) Behind() []Service {
	var b []Service
	for _, s := range st.Services {
		if !s.Restart && !s.done(st.Generation) {
			b = append(b, s)
		}
	}
	return b
}

// Table writes the services one a line, aligned: host, port, type,
// cluster, generation (of the wanted), health or failure.
func (st *State) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %6s  %-28s %-16s %10s  %s\n", "HOST", "PORT", "TYPE", "CLUSTER", "GENERATION", "STATE")
	for _, s := range st.Services {
		what := "ok"
		switch {
		case s.Failed != "":
			what = "failed: " + s.Failed
		case s.Restart:
			what = "waits for a restart"
		case s.Generation < st.Generation:
			what = "behind"
		case s.Type == "container" && s.Health != "up":
			what = "health " + cmp.Or(s.Health, "not read")
		case s.Type == "container" && s.Proxied:
			what = "up (through the config server)"
		case s.Type == "container":
			what = "up"
		}
		fmt.Fprintf(&b, "%-28s %6d  %-28s %-16s %10d  %s\n", s.Host, s.Port, s.Type, s.Cluster, s.Generation, what)
	}
	return b.String()
}

// converge is the config server's convergence check.
type converge struct {
	Services []struct {
		Cluster    string `json:"clusterName"`
		Host       string `json:"host"`
		Port       int    `json:"port"`
		Type       string `json:"type"`
		Generation int64  `json:"currentGeneration"`
		Config     *struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"config"`
	} `json:"services"`
	Current int64 `json:"currentGeneration"`
	Wanted  int64 `json:"wantedGeneration"`
}

// perService bounds the config server's wait for each service's answer
// (its ?timeout=, 5 s by default there).
const perService = 3 * time.Second

// state reads the convergence check once, with no retry.
func (c *Client) state(ctx context.Context, g int64) (*State, error) {
	t := perService
	if dl, ok := ctx.Deadline(); ok {
		t = max(min(t, time.Until(dl)/2), 100*time.Millisecond)
	}
	var cv converge
	path := c.instance() + "/serviceconverge?timeout=" + strconv.FormatFloat(t.Seconds(), 'f', 3, 64)
	if err := c.call(ctx, http.MethodGet, path, nil, "", &cv); err != nil {
		return nil, err
	}
	st := &State{Generation: g, Wanted: cv.Wanted, Current: cv.Current}
	for _, s := range cv.Services {
		x := Service{Cluster: s.Cluster, Host: s.Host, Port: s.Port, Type: s.Type, Generation: s.Generation}
		if s.Config != nil && s.Config.Status == "failed" {
			x.Failed = cmp.Or(s.Config.Message, "its configuration failed")
		}
		st.Services = append(st.Services, x)
	}
	slices.SortFunc(st.Services, func(a, b Service) int {
		return strings.Compare(a.Type+" "+a.Host+" "+strconv.Itoa(a.Port), b.Type+" "+b.Host+" "+strconv.Itoa(b.Port))
	})
	return st, nil
}

// same reports whether a and b say the same of every service.
func same(a, b *State) bool {
	return a != nil && b != nil && a.Wanted == b.Wanted && slices.Equal(a.Services, b.Services)
}

// sameGenerations reports whether a and b list the same services at the
// same generations.
func sameGenerations(a, b *State) bool {
	if a == nil || b == nil || len(a.Services) != len(b.Services) {
		return false
	}
	for i, x := range a.Services {
		y := b.Services[i]
		if x.Host != y.Host || x.Port != y.Port || x.Type != y.Type || x.Generation != y.Generation {
			return false
		}
	}
	return true
}
