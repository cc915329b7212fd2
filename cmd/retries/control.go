package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/control"
)

// Exit statuses of deploy and wait beside the others.
const exitRestart = 5 // converged, but services wait for a restart

// controlFlags are the flags of deploy and wait.
type controlFlags struct {
	url, tenant, application string
	generation               int
	wait                     time.Duration
	jsonOut                  string
	quiet                    bool
	conn                     connFlags
}

// deployTimeout bounds a deploy with -wait 0: the config server allows
// itself a few minutes to prepare a package.
const deployTimeout = 10 * time.Minute

func addControlFlags(fs *flag.FlagSet, f *controlFlags, wait bool) {
	fs.StringVar(&f.url, "url", control.DefaultURL, "the config server's `URL`")
	fs.StringVar(&f.tenant, "tenant", "default", "the `TENANT`")
	fs.StringVar(&f.application, "application", "default", "the `APPLICATION`")
	if wait {
		intVar(fs, &f.generation, "generation", 0, 0, 1<<62, "wait for generation `G`; 0: the application's current one")
		fs.DurationVar(&f.wait, "wait", 10*time.Minute, "give up after `D`: exit 4, naming what is behind")
	} else {
		fs.DurationVar(&f.wait, "wait", 10*time.Minute, "wait up to `D`, the deploy included, until the new generation serves; 0: deploy only (up to 10m), no wait")
	}
	fs.StringVar(&f.jsonOut, "json", "", "write a JSON summary to `FILE`")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines on stderr")
	addConnFlags(fs, &f.conn)
}

// controlRun is what deploy and wait did, for the last lines and -json.
type controlRun struct {
	Generation int64             `json:"generation"`
	Previous   int64             `json:"previous,omitempty"`
	Posts      int               `json:"posts"`
	Adopted    bool              `json:"adopted"`
	Activated  bool              `json:"activated"`
	Converged  bool              `json:"converged"`
	Healthy    bool              `json:"healthy"`
	Restart    []string          `json:"restart"`
	Exit       int               `json:"exit"`
	Error      string            `json:"error,omitempty"`
	Phases     map[string]string `json:"phases"`
	Services   []controlService  `json:"services,omitempty"`
}

type controlService struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Type       string `json:"type"`
	Cluster    string `json:"cluster"`
	Generation int64  `json:"generation"`
	Health     string `json:"health,omitempty"`
	Proxied    bool   `json:"proxied,omitempty"`
	Failed     string `json:"failed,omitempty"`
	Restart    bool   `json:"restart,omitempty"`
}

func runDeploy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runControl(ctx, "deploy", args, stdout, stderr)
}

func runWait(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runControl(ctx, "wait", args, stdout, stderr)
}

// runControl runs deploy (a package posted, then the wait) or wait: its
// flags checked, the package read and -json opened, the deploy, the wait,
// and its end said.
func runControl(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(name)
	var f controlFlags
	addControlFlags(fs, &f, name == "wait")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := f.check(name, pos); err != nil {
		return err
	}
	var pkg []byte
	if name == "deploy" {
		if pkg, err = control.Package(pos[0]); err != nil {
			return setupErrorf("deploy: %v", strings.TrimPrefix(err.Error(), "control: "))
		}
	}
	header, tlsCfg, err := f.conn.load()
	if err != nil {
		return setupErrorf("%s: %v", name, err)
	}
	var jsonOut *os.File
	if f.jsonOut != "" {
		// Opened now: a FILE that cannot be written is said before the deploy.
		if jsonOut, err = os.OpenFile(f.jsonOut, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return setupErrorf("%s: -json: %v", name, err)
		}
		defer jsonOut.Close()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	p := &controlProgress{name: name, quiet: f.quiet, stderr: stderr, start: time.Now(),
		run: &controlRun{Phases: map[string]string{}, Restart: []string{}}}
	c, err := control.New(control.Config{URL: f.url, Tenant: f.tenant, Application: f.application, Header: header, Transport: tr,
		OnFailure: p.failure, OnState: p.state})
	if err != nil {
		return usageErrorf("%s: %v", name, err)
	}
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, cmp.Or(f.wait, deployTimeout)) // wait has -wait > 0
	defer cancel()
	end := func(st *control.State, err error) error {
		p.enter("")
		return controlEnd(ctx, wctx, name, p.run, st, err, stdout, stderr, jsonOut)
	}
	g := int64(f.generation)
	var restart []control.Restart
	if name == "deploy" {
		p.enter("deploy")
		p.say("posting %s (%d bytes) to %s", pos[0], len(pkg), c.URL())
		d, err := c.Deploy(wctx, pkg)
		if err != nil {
			p.run.Posts, p.run.Previous = d.Posts, d.Previous
			return end(nil, deployError(err, d))
		}
		p.deployed(d)
		if f.wait == 0 {
			return end(nil, nil)
		}
		g, restart = d.Generation, d.Restart
	}
	p.enter("converge")
	st, err := c.Wait(wctx, g, restart)
	if st != nil {
		p.run.Generation = st.Generation
	}
	return end(st, err)
}

// check returns a usage error for flags and arguments pos that cannot
// make a deploy or a wait (name).
func (f *controlFlags) check(name string, pos []string) error {
	switch {
	case f.conn.header.check() != nil:
		return usageErrorf("%s: %v", name, f.conn.header.check())
	case name == "deploy" && len(pos) != 1:
		return usageErrorf("deploy: want one APP_DIR or APP.zip, got %d arguments", len(pos))
	case name == "wait" && len(pos) > 0:
		return usageErrorf("wait: unexpected argument %q", pos[0])
	case f.wait < 0 && name == "deploy":
		return usageErrorf("deploy: -wait %v: want a positive duration (0: deploy only)", f.wait)
	case f.wait <= 0 && name == "wait":
		return usageErrorf("wait: -wait %v: want a positive duration", f.wait)
	}
	return nil
}

// controlProgress says how a deploy or a wait moves, on stderr unless
// quiet, and times its phases (deploy, converge, health) for -json.
type controlProgress struct {
	name        string
	quiet       bool
	stderr      io.Writer
	start       time.Time
	run         *controlRun
	phase       string
	phaseStart  time.Time
	lastLine    string
	lastFailure string
	saidAt      time.Time
}

func (p *controlProgress) say(format string, a ...any) {
	if !p.quiet {
		fmt.Fprintf(p.stderr, "retries "+p.name+": "+format+"\n", a...)
	}
}

// enter ends the phase under way, timed, and starts phase ("" for none).
func (p *controlProgress) enter(phase string) {
	now := time.Now()
	if p.phase != "" {
		p.run.Phases[p.phase] = now.Sub(p.phaseStart).Round(time.Millisecond).String()
	}
	p.phase, p.phaseStart = phase, now
}

// failure says a failed call to the config server: when its cause
// changes, and every 10 s while it lasts.
func (p *controlProgress) failure(err error) {
	if m := strings.TrimPrefix(err.Error(), "control: "); m != p.lastFailure || time.Since(p.saidAt) >= 10*time.Second {
		p.say("the config server: %s; trying again (%.1fs)", m, time.Since(p.start).Seconds())
		p.lastFailure, p.saidAt = m, time.Now()
	}
}

// state says where the services are when it changes; the converge phase
// ends when none is below the generation (the health phase follows).
func (p *controlProgress) state(st *control.State) {
	line := progressLine(st)
	if behind := st.Behind(); p.phase == "converge" && !anyBelow(behind, st.Generation) {
		p.enter("health")
	}
	if line != p.lastLine {
		p.say("%s (%.1fs)", line, time.Since(p.start).Seconds())
		p.lastLine = line
	}
}

// deployed records and says what the deploy came to.
func (p *controlProgress) deployed(d *control.Deployment) {
	run := p.run
	run.Posts, run.Previous = d.Posts, d.Previous
	run.Generation, run.Adopted, run.Activated = d.Generation, d.Adopted, d.Activated
	switch {
	case d.Adopted:
		p.say("the answer was lost on the way; generation %d (was %d) landed, adopted: posted once", d.Generation, d.Previous)
	case d.Activated:
		p.say("session %d was prepared but not activated; activated it: generation %d (was %d)", d.Generation, d.Generation, d.Previous)
	default:
		p.say("%s: generation %d (was %d)", strings.TrimSuffix(d.Message, "."), d.Generation, d.Previous)
	}
	for _, r := range d.Restart {
		run.Restart = append(run.Restart, r.Type+" on "+r.Host)
		p.say("%s on %s (cluster %s) applies the change only when restarted: %s", r.Type, r.Host, r.Cluster, strings.Join(r.Messages, "; "))
	}
	for _, a := range append(d.Refeed, d.Reindex...) {
		p.say("the change asks for %s of %s in cluster %s: %s", a.Name, a.DocumentType, a.Cluster, strings.Join(a.Messages, "; "))
	}
}

// deployError returns err, from Deploy, with what a user must know of
// one that ended after a POST: the package may have landed.
func deployError(err error, d *control.Deployment) error {
	if d != nil && d.Posts > 0 && !errors.As(err, new(*control.Error)) {
		return fmt.Errorf("%w (the package was posted %d times: whether the last landed is unknown; 'retries wait' says)", err, d.Posts)
	}
	return err
}

// anyBelow reports whether a service of s is below generation g.
func anyBelow(s []control.Service, g int64) bool {
	for _, x := range s {
		if x.Generation < g {
			return true
		}
	}
	return false
}

// progressLine says where the services are: how many are done, and the
// first few behind.
func progressLine(st *control.State) string {
	behind := st.Behind()
	n := len(st.Services) - len(behind)
	s := fmt.Sprintf("generation %d: %d of %d services done", st.Generation, n, len(st.Services))
	if len(behind) == 0 {
		return s
	}
	parts := make([]string, 0, 3)
	for i, b := range behind {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(behind)-3))
			break
		}
		parts = append(parts, b.String())
	}
	return s + "; behind: " + strings.Join(parts, "; ")
}

// controlEnd reports how deploy or wait ended, writes -json, and returns
// the exit status as an error.
func controlEnd(ctx, wctx context.Context, name string, run *controlRun, st *control.State, err error, stdout, stderr io.Writer, jsonOut *os.File) error {
	code, msg := controlOutcome(ctx, wctx, run, st, err)
	run.Exit = code
	if err != nil {
		run.Error = msg
	}
	if st != nil {
		run.Converged = !anyBelow(st.Behind(), st.Generation) && code != exitFail
		run.Healthy = code == exitOK || code == exitRestart
		for _, s := range st.Services {
			run.Services = append(run.Services, controlService{Host: s.Host, Port: s.Port, Type: s.Type, Cluster: s.Cluster,
				Generation: s.Generation, Health: s.Health, Proxied: s.Proxied, Failed: s.Failed, Restart: s.Restart})
			if s.Restart && code == exitRestart && !slices.Contains(run.Restart, s.Type+" on "+s.Host) {
				run.Restart = append(run.Restart, s.Type+" on "+s.Host)
			}
		}
		fmt.Fprint(stdout, st.Table())
	}
	fmt.Fprintf(stderr, "retries %s: %s\n", name, msg)
	if jsonOut != nil {
		b, _ := json.MarshalIndent(run, "", "  ")
		if _, werr := jsonOut.Write(append(b, '\n')); werr != nil {
			fmt.Fprintf(stderr, "retries %s: -json: %v\n", name, werr)
			code = max(code, exitFail)
		}
	}
	if code == exitOK {
		return nil
	}
	return silentExit(code)
}

// controlOutcome is the exit status of a deploy or a wait that ended with
// err (nil: done), and what to say of it.
func controlOutcome(ctx, wctx context.Context, run *controlRun, st *control.State, err error) (code int, msg string) {
	var (
		ce *control.ConfigError
		re *control.RestartError
		be *control.BehindError
		e  *control.Error
	)
	code = exitOK
	switch {
	case err == nil:
		if st != nil {
			msg = fmt.Sprintf("generation %d serves: every service at it, every container up", st.Generation)
		} else {
			msg = fmt.Sprintf("generation %d activated (no wait)", run.Generation)
		}
	case ctx.Err() != nil:
		code, msg = exitInterrupted, "interrupted: "+strings.TrimPrefix(err.Error(), "control: ")
	case errors.As(err, &re):
		code, msg = exitRestart, strings.TrimPrefix(err.Error(), "control: ")
	case errors.As(err, &ce):
		code, msg = exitFail, fmt.Sprintf("%s on %s:%d (cluster %s) failed to apply generation %d: %s", ce.Service.Type, ce.Service.Host, ce.Service.Port, ce.Service.Cluster, run.Generation, ce.Service.Failed)
	case errors.As(err, &be):
		code, msg = exitOutage, "-wait ran out "+strings.TrimPrefix(err.Error(), "control: context deadline exceeded ")
	case wctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		// The calls' retries stop before a wait that would pass -wait.
		last := err
		if re := (*retries.RetryError)(nil); errors.As(err, &re) && re.Err != nil {
			last = re.Err
		}
		code, msg = exitOutage, "-wait ran out before the config server answered: "+strings.TrimPrefix(last.Error(), "control: ")
	case errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden):
		code, msg = exitUsage, strings.TrimPrefix(err.Error(), "control: ")+": check the credentials (-header, -cert, -key)"
	case errors.As(err, &e) && e.Status == http.StatusNotFound && e.Method == http.MethodPost:
		code, msg = exitFail, strings.TrimPrefix(err.Error(), "control: ")+": is -url the config server's (its port is 19071 by default)?"
	default:
		code, msg = exitFail, strings.TrimPrefix(err.Error(), "control: ")
	}
	return code, msg
}
