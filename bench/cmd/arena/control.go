package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed32e55400/retries/control/controltest"
)

// controlConfig is the -control mode's: a config server stand-in
// (package controltest) on loopback, two containers, a content node and a
// distributor, each reaching a new generation after a lag drawn from
// [lagMin, lagMax], deployed to -deploys times by the feeder.
type controlConfig struct {
	deploys        int
	lagMin, lagMax time.Duration
	fault          string
}

// controlFaults are the -control-fault values: what the stand-in does
// to each deploy.
var controlFaults = []string{"none", "lost-after", "lost-before", "not-activated", "fail", "restart", "proxy", "down", "lag"}

// runControl runs the feeder (a deploy: $ARENA_URL is the config server,
// $ARENA_APP a package directory) c.deploys times against a stand-in, and
// returns a line a deploy and the summary: how long after the stand-in
// had the generation done (every service at it, every container up, those
// that wait for a restart left out), or after a service's failure to apply
// it showed, the feeder exited, and the POSTs it saw.
func runControl(c config, feeder []string) (string, int, error) {
	cc := c.control
	if !slices.Contains(controlFaults, cc.fault) {
		return "", 0, fmt.Errorf("-control-fault %q: want one of %s", cc.fault, strings.Join(controlFaults, ", "))
	}
	dir, err := os.MkdirTemp("", "arena")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)
	app := filepath.Join(dir, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(app, "services.xml"), []byte("<services version=\"1.0\"/>\n"), 0o644); err != nil {
		return "", 0, err
	}
	rng := rand.New(rand.NewPCG(c.seed, 1))
	var lines []string
	var lates []time.Duration
	exit, posts := 0, 0
	for i := range cc.deploys {
		lag := func() time.Duration {
			return cc.lagMin + time.Duration(rng.Int64N(int64(cc.lagMax-cc.lagMin)+1))
		}
		s := &controltest.Server{Services: []controltest.Service{
			{Type: "container", Cluster: "default", Lag: lag(), Initializing: 100 * time.Millisecond},
			{Type: "container", Cluster: "default", Lag: lag(), Initializing: 100 * time.Millisecond},
			{Type: "searchnode", Cluster: "music", Host: "node1.internal", Port: 19107, Lag: lag(), ProxyOnly: true},
			{Type: "distributor", Cluster: "music", Host: "node1.internal", Port: 19111, Lag: lag(), ProxyOnly: true},
		}}
		switch cc.fault {
		case "lost-after":
			s.Posts = []controltest.Fault{controltest.LostAfterCommit}
		case "lost-before":
			s.Posts = []controltest.Fault{controltest.LostBeforeCommit}
		case "not-activated":
			s.Posts, s.ActivateConflicts = []controltest.Fault{controltest.NotActivated}, 3
		case "fail":
			s.Services[1].Fail = "Could not construct component 'model': the file is empty"
		case "restart":
			s.Services[0].Restart = true
		case "proxy":
			s.Services[0].ProxyOnly, s.Services[1].ProxyOnly = true, true
			s.Services[0].Host, s.Services[1].Host = "c1.internal", "c2.internal"
		case "lag":
			s.Services[1].Lag = time.Hour
		}
		s.Start()
		s.Deployed(int64(i + 1))
		if cc.fault == "down" {
			now := time.Now()
			s.Refuse, s.Unavailable = now.Add(3*time.Second), now.Add(6*time.Second)
		}
		env := map[string]string{"ARENA_URL": s.URL(), "ARENA_APP": app}
		start := time.Now()
		r, err := runFeeder(feeder, env, c.limit, start)
		end := time.Now()
		s.Close()
		if err != nil {
			return "", 0, err
		}
		k := s.Counts()
		posts += k.Posts
		exit = max(exit, r.exit)
		line := fmt.Sprintf("deploy %d: exit=%d posts=%d activations=%v elapsed=%.2fs", i+1, r.exit, k.Posts, k.Activations, r.elapsed.Seconds())
		switch {
		case !k.FailedAt.IsZero():
			late := end.Sub(k.FailedAt)
			lates = append(lates, late)
			line += fmt.Sprintf(" failed-after-start=%.2fs exit-after-failure=%dms", k.FailedAt.Sub(start).Seconds(), late.Milliseconds())
		case !k.DoneAt.IsZero() && k.DoneAt.Before(end):
			late := end.Sub(k.DoneAt)
			lates = append(lates, late)
			line += fmt.Sprintf(" done-after-start=%.2fs exit-after-done=%dms", k.DoneAt.Sub(start).Seconds(), late.Milliseconds())
		case !k.DoneAt.IsZero():
			line += " done: not before the exit"
		}
		line += fmt.Sprintf(" requests: converge=%d health=%d proxied=%d generation=%d refused=%d 503=%d", k.Converges, k.Health, k.Proxied, k.Generations, k.Refused, k.Unavailable)
		lines = append(lines, line)
	}
	sum := fmt.Sprintf("%-22s deploys=%d posts=%d", c.label, cc.deploys, posts)
	if len(lates) > 0 {
		slices.Sort(lates)
		sum += fmt.Sprintf(" exit-after-done-or-failure: median=%dms max=%dms min=%dms", lates[len(lates)/2].Milliseconds(), lates[len(lates)-1].Milliseconds(), lates[0].Milliseconds())
	}
	return strings.Join(append(lines, sum), "\n"), exit, nil
}
