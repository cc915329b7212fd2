// Package controltest is a stand-in for a self-hosted Vespa config server
// and the services of one application, for tests of package control and
// of retries deploy and retries wait: each service reaches a new
// generation after its own lag, or fails to apply it, or waits for a
// restart; a container answers "initializing" for a while after; a host
// can be reachable only through the config server's proxy; the POSTs of a
// package can have their answers lost before or after the commit, be
// answered "activated": false, or be refused.
//
// It serves in two ways: in process, through the RoundTripper Transport
// returns (no sockets, so that a test runs under testing/synctest with
// fake time), or on loopback sockets after Start, for a process.
package controltest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Service is one service of the stand-in's application.
type Service struct {
	Type, Cluster, Host string
	Port                int
	// Lag is how long after an activation it runs the new generation.
	Lag time.Duration
	// Initializing is how long a container's health says "initializing"
	// once it runs a new generation.
	Initializing time.Duration
	// Fail, if set, is the message of its failure to apply every
	// generation after the first.
	Fail string
	// Restart says it applies a new generation only when restarted: it
	// stays at the one before, and says applyOnRestart.
	Restart bool
	// ProxyOnly says its host cannot be reached from the client (a name
	// only the cluster resolves): only the config server's proxy reaches it.
	ProxyOnly bool
}

// Fault is what happens to one POST of a package.
type Fault int

const (
	// PostOK answers the POST with the activated session.
	PostOK Fault = iota
	// LostAfterCommit activates the session, then cuts the connection
	// before the answer.
	LostAfterCommit
	// LostBeforeCommit cuts the connection before anything is done.
	LostBeforeCommit
	// NotActivated prepares the session and answers 200 "activated":
	// false, as a config server whose activation hit a lock.
	NotActivated
	// Conflict answers 409 APPLICATION_LOCK_FAILURE, doing nothing.
	Conflict
	// Invalid answers 400 INVALID_APPLICATION_PACKAGE.
	Invalid
	// Unauthorized answers 401.
	Unauthorized
)

// Server is the stand-in. Set its fields before the first request; read
// its counts with Counts.
type Server struct {
	// Services are the application's services.
	Services []Service
	// Posts is the fault of each POST in turn; PostOK past the end.
	Posts []Fault
	// ActivateConflicts is how many PUTs activating a session are
	// answered 409 ACTIVATION_CONFLICT before one succeeds.
	ActivateConflicts int
	// Refuse, until then, refuses every connection to the config server
	// (on a socket, after Start: cuts it before any answer); Unavailable,
	// until then, answers it 503.
	Refuse, Unavailable time.Time

	mu         sync.Mutex
	generation int64 // active; 0 before the first deployment
	session    int64 // the last session id given
	prepared   map[int64]bool
	states     []state
	counts     Counts
	addr       string // the config server's host:port
	servers    []*httptest.Server
}

// state is a service's generations.
type state struct {
	gen     int64     // the generation it ran before the latest activation
	next    int64     // the latest activation's, from at on
	at      time.Time // when it runs next
	upAt    time.Time // when a container says up at next
	applied bool      // whether next is applied (not a failure nor a restart)
}

// Counts are what the stand-in saw.
type Counts struct {
	Posts, Puts, Converges, Health, Proxied, Generations int
	// Refused and Unavailable are the requests to the config server
	// refused (Server.Refuse) and answered 503 (Server.Unavailable).
	Refused, Unavailable int
	// Activations are the generations activated, in order.
	Activations []int64
	// DoneAt is when the latest generation was done: every service at it
	// and every container up, those that wait for a restart left out (zero
	// when a service fails to apply it). FailedAt is when the first
	// service's failure to apply it showed (zero when none fails).
	DoneAt, FailedAt time.Time
}

// Counts returns what the stand-in saw so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.Activations = append([]int64(nil), c.Activations...)
	return c
}

// Deployed activates generation g at once with every service at it and
// up: an application deployed before the test.
func (s *Server) Deployed(g int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.generation, s.session = g, g
	for i := range s.states {
		s.states[i] = state{gen: g, next: g, applied: true}
	}
}

func (s *Server) init() {
	if s.states == nil {
		s.states = make([]state, len(s.Services))
		s.prepared = map[int64]bool{}
		if s.addr == "" {
			s.addr = "config.test:19071"
		}
	}
}

// URL is the config server's, in process unless Start was called.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return "http://" + s.addr
}

// activate makes generation g active now. s.mu is held.
func (s *Server) activate(g int64) {
	now := time.Now()
	s.generation = g
	s.counts.Activations = append(s.counts.Activations, g)
	done, failed := now, time.Time{}
	for i, sv := range s.Services {
		st := &s.states[i]
		st.gen = st.current(now)
		st.next, st.at, st.applied = g, now.Add(sv.Lag), sv.Fail == "" && !sv.Restart
		st.upAt = st.at.Add(sv.Initializing)
		switch {
		case sv.Fail != "" && (failed.IsZero() || st.at.Before(failed)):
			failed = st.at
		case st.applied && st.upAt.After(done):
			done = st.upAt
		}
	}
	if !failed.IsZero() {
		done = time.Time{}
	}
	s.counts.DoneAt, s.counts.FailedAt = done, failed
}

// current is the generation the service runs at now: -1 once it failed.
func (st *state) current(now time.Time) int64 {
	if now.Before(st.at) || st.next == 0 {
		return st.gen
	}
	if !st.applied {
		return st.gen // a restart's: the one before; a failure's is said apart
	}
	return st.next
}

// Transport returns a RoundTripper that serves the stand-in in process:
// the config server at URL, each service at its Host and Port. A host of
// a ProxyOnly service, or one that is not there, fails as a dial does.
func (s *Server) Transport() http.RoundTripper { return transport{s} }

type transport struct{ s *Server }

// RoundTrip serves r in process: an answer, or the error of a dial
// refused or of a connection cut before the answer.
func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	s := t.s
	if r.Body != nil {
		defer r.Body.Close()
	}
	s.mu.Lock()
	s.init()
	addr := s.addr
	refused := r.URL.Host == addr && time.Now().Before(s.Refuse)
	if refused {
		s.counts.Refused++
	}
	svc := -1
	for i, sv := range s.Services {
		if net.JoinHostPort(sv.Host, strconv.Itoa(sv.Port)) == r.URL.Host && !sv.ProxyOnly {
			svc = i
		}
	}
	s.mu.Unlock()
	if refused || r.URL.Host != addr && svc < 0 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: connection refused (%s)", r.URL.Host)}
	}
	w := httptest.NewRecorder()
	lost := func() (lost bool) {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				lost = true
			}
		}()
		if svc >= 0 {
			s.serveService(w, r, svc)
		} else {
			s.ServeHTTP(w, r)
		}
		return false
	}()
	if lost {
		return nil, io.ErrUnexpectedEOF
	}
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// Start serves the stand-in on loopback sockets: the config server, and
// each service that is not ProxyOnly on a socket of its own, whose Host
// and Port become the socket's (an address of 127.0.0.0/8 of its own
// where the system has one, else 127.0.0.1). Close stops them.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	cs := httptest.NewServer(s)
	s.servers = append(s.servers, cs)
	s.addr = cs.Listener.Addr().String()
	for i := range s.Services {
		if s.Services[i].ProxyOnly {
			continue
		}
		i := i
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveService(w, r, i) }))
		// A host of its own where the system has one (Linux answers the
		// whole of 127.0.0.0/8), as the config server names services by
		// host: two containers on one host are one to a restart action.
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", 2+len(s.servers))); err == nil {
			srv.Listener.Close()
			srv.Listener = l
		}
		srv.Start()
		s.servers = append(s.servers, srv)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		s.Services[i].Host = host
		s.Services[i].Port, _ = strconv.Atoi(port)
	}
}

// Close stops what Start started.
func (s *Server) Close() {
	for _, x := range s.servers {
		x.Close()
	}
}

// ServeHTTP serves the config server's deploy API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	if s.down(w) {
		return
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && s.get(w, r, p):
	case r.Method == http.MethodPost && len(p) == 5 && p[4] == "prepareandactivate":
		s.post(w, r)
	case r.Method == http.MethodPut && len(p) == 7 && p[4] == "session" && p[6] == "active":
		n, _ := strconv.ParseInt(p[5], 10, 64)
		s.put(w, n)
	default:
		fail(w, http.StatusNotFound, "NOT_FOUND", "no such path: "+r.URL.Path)
	}
}

// get serves a GET of the path whose parts are p, and reports whether the
// path is one it serves.
func (s *Server) get(w http.ResponseWriter, r *http.Request, p []string) bool {
	switch {
	case r.URL.Path == "/status.html": // what the vespa CLI probes first
		w.Write([]byte("<title>OK</title>\n"))
	case r.URL.Path == "/state/v1/version":
		reply(w, map[string]string{"version": "8.600.1"})
	case len(p) == 6 && p[0] == "application" && p[2] == "tenant" && p[4] == "application":
		s.getGeneration(w)
	case len(p) == 13 && p[12] == "serviceconverge":
		s.converge(w)
	case len(p) == 18 && p[12] == "service" && p[15] == "state":
		s.proxy(w, r, p[14], p[17])
	default:
		return false
	}
	return true
}

// down answers as a config server that is down (Refuse: the connection
// cut; Unavailable: 503) and reports whether it was.
func (s *Server) down(w http.ResponseWriter) bool {
	s.mu.Lock()
	s.init()
	refused, unavailable := time.Now().Before(s.Refuse), time.Now().Before(s.Unavailable)
	switch {
	case refused:
		s.counts.Refused++
	case unavailable:
		s.counts.Unavailable++
	}
	s.mu.Unlock()
	switch {
	case refused: // on a socket: the connection is cut (in process, refused)
		panic(http.ErrAbortHandler)
	case unavailable:
		fail(w, http.StatusServiceUnavailable, "", "the config server is starting")
	}
	return unavailable
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error-code": code, "message": msg})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) getGeneration(w http.ResponseWriter) {
	s.mu.Lock()
	s.counts.Generations++
	g := s.generation
	s.mu.Unlock()
	if g == 0 {
		fail(w, http.StatusNotFound, "NOT_FOUND", "no application deployed")
		return
	}
	reply(w, map[string]any{"generation": g})
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := PostOK
	if s.counts.Posts < len(s.Posts) {
		f = s.Posts[s.counts.Posts]
	}
	s.counts.Posts++
	switch f {
	case LostBeforeCommit:
		panic(http.ErrAbortHandler)
	case Unauthorized:
		fail(w, http.StatusUnauthorized, "", "unauthorized")
		return
	case Conflict:
		fail(w, http.StatusConflict, "APPLICATION_LOCK_FAILURE", "the application is locked by another deployment")
		return
	}
	if r.Header.Get("Content-Type") != "application/zip" {
		fail(w, http.StatusBadRequest, "BAD_REQUEST", "Unable to handle request: the content type "+r.Header.Get("Content-Type"))
		return
	}
	if f == Invalid || !hasServices(body) {
		fail(w, http.StatusBadRequest, "INVALID_APPLICATION_PACKAGE", "Invalid application: services.xml: not found at the root of the package")
		return
	}
	s.session++
	n := s.session
	var restart []map[string]any
	for _, sv := range s.Services {
		if sv.Restart {
			restart = append(restart, map[string]any{"clusterName": sv.Cluster, "clusterType": sv.Type, "serviceType": sv.Type,
				"messages": []string{"a change that applies on restart"},
				"services": []map[string]string{{"serviceName": sv.Type, "serviceType": sv.Type, "configId": sv.Cluster, "hostName": sv.Host}}})
		}
	}
	activated := f != NotActivated
	if activated {
		s.activate(n)
	} else {
		s.prepared[n] = true
	}
	if f == LostAfterCommit {
		panic(http.ErrAbortHandler)
	}
	msg := fmt.Sprintf("Session %d for tenant 'default' prepared and activated.", n)
	if !activated {
		msg = fmt.Sprintf("Session %d for tenant 'default' prepared, but activation failed: lock timed out", n)
	}
	reply(w, map[string]any{"session-id": strconv.FormatInt(n, 10), "activated": activated, "message": msg, "tenant": "default",
		"configChangeActions": map[string]any{"restart": restart, "refeed": []any{}, "reindex": []any{}}})
}

func (s *Server) put(w http.ResponseWriter, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Puts++
	if !s.prepared[n] {
		fail(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no prepared session %d", n))
		return
	}
	if s.ActivateConflicts > 0 {
		s.ActivateConflicts--
		fail(w, http.StatusConflict, "ACTIVATION_CONFLICT", "Timed out waiting for the application lock")
		return
	}
	delete(s.prepared, n)
	s.activate(n)
	reply(w, map[string]any{"session-id": strconv.FormatInt(n, 10), "message": fmt.Sprintf("Session %d for tenant 'default' activated.", n)})
}

// hasServices reports whether b is a zip archive with services.xml at its
// root.
func hasServices(b []byte) bool {
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return false
	}
	for _, f := range z.File {
		if f.Name == "services.xml" {
			return true
		}
	}
	return false
}

func (s *Server) converge(w http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Converges++
	now := time.Now()
	type cfg struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	type svc struct {
		Cluster string `json:"clusterName"`
		Host    string `json:"host"`
		Port    int    `json:"port"`
		Type    string `json:"type"`
		URL     string `json:"url"`
		Gen     int64  `json:"currentGeneration"`
		Config  *cfg   `json:"config,omitempty"`
	}
	out := struct {
		Services []svc `json:"services"`
		Current  int64 `json:"currentGeneration"`
		Wanted   int64 `json:"wantedGeneration"`
		Conv     bool  `json:"converged"`
		Config   *cfg  `json:"config,omitempty"`
	}{Wanted: s.generation, Current: s.generation}
	for i, sv := range s.Services {
		st := s.states[i]
		x := svc{Cluster: sv.Cluster, Host: sv.Host, Port: sv.Port, Type: sv.Type, Gen: st.current(now)}
		x.URL = fmt.Sprintf("http://%s/serviceconverge/%s:%d", s.addr, sv.Host, sv.Port)
		if sv.Fail != "" && st.next > 0 && !st.applied && !now.Before(st.at) {
			x.Gen, x.Config = -1, &cfg{Status: "failed", Message: sv.Fail}
			out.Config = x.Config
		}
		out.Current = min(out.Current, x.Gen)
		out.Services = append(out.Services, x)
	}
	out.Conv = out.Current >= out.Wanted
	reply(w, out)
}

// proxy serves INST/service/TYPE/HOST/state/v1/WHAT as the config server
// does: the first such service on the host answers.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, host, what string) {
	s.mu.Lock()
	s.counts.Proxied++
	i := -1
	for j, sv := range s.Services {
		if sv.Host == host && sv.Type == "container" {
			i = j
			break
		}
	}
	s.mu.Unlock()
	if i < 0 {
		fail(w, http.StatusNotFound, "NOT_FOUND", "no container on "+host)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/state/v1/" + what
	s.serveService(w, r2, i)
}

// serveService serves a container's /state/v1/health and config.
func (s *Server) serveService(w http.ResponseWriter, r *http.Request, i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	st, sv := s.states[i], s.Services[i]
	switch r.URL.Path {
	case "/state/v1/health":
		s.counts.Health++
		code := "up"
		if st.applied && now.Before(st.upAt) && !now.Before(st.at) {
			code = "initializing"
		}
		reply(w, map[string]any{"time": now.UnixMilli(), "status": map[string]string{"code": code}})
	case "/state/v1/config":
		c := map[string]any{"generation": st.current(now), "applyOnRestart": sv.Restart && st.next > st.gen && !now.Before(st.at),
			"wantedGeneration": st.next}
		if sv.Fail != "" && !st.applied && st.next > 0 {
			c["message"] = sv.Fail
		}
		reply(w, map[string]any{"config": c})
	default:
		fail(w, http.StatusNotFound, "", "no such path")
	}
}
