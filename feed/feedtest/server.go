// Package feedtest provides a Vespa document/v1 server on a loopback port
// for tests of code that feeds Vespa, as net/http/httptest does for HTTP:
// it answers as Vespa does, fails, throttles and resets connections as
// told, and records what it applied.
package feedtest

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Reset is the fault that makes the Server reset the connection.
const Reset = -1

// Server is a document/v1 endpoint on a loopback port that records what it
// receives (a gzipped body decompressed) and answers what its fault
// function says: 0 for a 200 (the
// operation is applied), a status, or Reset. Faults happen before an
// operation is applied, so a document applied twice was sent twice after a
// success.
type Server struct {
	*httptest.Server
	fault func(r *http.Request, n int) int // n: earlier requests for the same method and path

	lnMu   sync.Mutex // held while Down, Up and Close use the listeners, and Close marks closed
	closed bool
	// ln is the listener Up opened last, or nil. The embedded Listener is
	// left as httptest set it: its serving goroutine reads that field, and
	// nothing would order the read before a write by Up (the race detector
	// says so).
	ln net.Listener

	mu      sync.Mutex
	seen    map[string]int // requests per method and path
	applied []string       // "METHOD path?query body" in the order applied
	headers []http.Header
	protos  []int
	conns   map[string]bool // the remote addresses of the requests
}

// NewServer starts a Server with fault, which may be nil (every request
// is applied). The caller closes it with Close.
func NewServer(fault func(r *http.Request, n int) int) *Server {
	s := &Server{fault: fault, seen: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// New starts a Server with fault, as NewServer does, and closes it when
// the test ends.
func New(t testing.TB, fault func(r *http.Request, n int) int) *Server {
	t.Helper()
	s := NewServer(fault)
	t.Cleanup(s.Close)
	return s
}

// NewH2C starts a Server that speaks HTTP/1.1 and HTTP/2 without TLS (as
// Vespa's feed clients speak to a container with prior knowledge), and
// closes it when the test ends.
func NewH2C(t testing.TB) *Server {
	t.Helper()
	s := &Server{seen: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s.Config.Protocols = &p
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.RequestURI()
	var src io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, "bad gzip: "+err.Error(), http.StatusBadRequest)
			return
		}
		src = zr
	}
	body, err := io.ReadAll(src)
	if err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := s.seen[key]
	s.seen[key]++
	s.headers = append(s.headers, r.Header.Clone())
	s.protos = append(s.protos, r.ProtoMajor)
	if s.conns == nil {
		s.conns = map[string]bool{}
	}
	s.conns[r.RemoteAddr] = true
	s.mu.Unlock()
	code := 0
	if s.fault != nil {
		code = s.fault(r, n)
	}
	switch code {
	case 0:
		s.mu.Lock()
		s.applied = append(s.applied, strings.TrimSpace(key+" "+string(body)))
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"pathId": r.URL.Path})
	case Reset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	default:
		writeJSON(w, code, map[string]string{"message": fmt.Sprintf("fault %d for %s", code, r.URL.Path)})
	}
}

// Applied returns what the server applied, in order, each as
// "METHOD path?query body".
func (s *Server) Applied() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}

// Requests returns the number of requests for method and path (with its
// query).
func (s *Server) Requests(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[method+" "+path]
}

// Headers returns the headers of every request, in order.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.headers)
}

// Conns returns the number of connections that requests came on.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Protos returns the major HTTP version of every request, in order.
func (s *Server) Protos() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.protos)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Down stops listening and closes every connection, so that new ones are
// refused, as when a server goes away. Down, Up and Close may be called
// from any goroutine.
func (s *Server) Down() {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	_ = s.listener().Close()
	s.CloseClientConnections()
}

// listener returns the listener in use: Up's last, or httptest's. s.lnMu
// is held.
func (s *Server) listener() net.Listener {
	if s.ln != nil {
		return s.ln
	}
	return s.Listener
}

// Close shuts the server down, as httptest.Server's Close does; Up then
// fails.
func (s *Server) Close() {
	s.lnMu.Lock()
	s.closed = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.lnMu.Unlock()
	s.Server.Close()
}

// Up listens again on the address Down gave up.
func (s *Server) Up() error {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.closed {
		return errors.New("feedtest: Up after Close")
	}
	ln, err := net.Listen("tcp", s.Listener.Addr().String())
	if err != nil {
		return fmt.Errorf("listening again: %w", err)
	}
	s.ln = ln
	go func() { _ = s.Config.Serve(ln) }()
	return nil
}
