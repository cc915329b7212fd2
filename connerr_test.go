package retries_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed32e55400/retries"
)

// The failures below are produced for real on 127.0.0.1, and each case checks
// that the error has the shape recorded in its comment before it checks the
// classification, so that the expectations rest on what net/http and net
// return (Go 1.26, Linux) rather than on hand-built errors. The recorded
// chains list the types that Unwrap yields, outermost first.

// connClientTimeout bounds every request, so that no test can hang.
const connClientTimeout = 10 * time.Second

func connClient() *http.Client {
	return &http.Client{Timeout: connClientTimeout}
}

// connRefusedAddr returns a loopback address on which nothing listens: a
// port that was just bound and released.
func connRefusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return addr
}

// connServer starts a loopback HTTP server whose log goes nowhere (a TLS
// server would otherwise log every refused handshake) and closes it when the
// test ends.
func connServer(t *testing.T, tlsServer bool, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// connHijack starts a server that takes over each connection, after the
// request has been read, and hands it to f. A hijacked connection is not
// tracked by the server, so f must return on its own.
func connHijack(t *testing.T, f func(c *net.TCPConn, w *bufio.Writer)) *httptest.Server {
	t.Helper()
	return connServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer c.Close()
		f(c.(*net.TCPConn), rw.Writer)
	}))
}

// connReset closes c with SO_LINGER 0, so that the kernel sends RST instead
// of FIN and the peer sees ECONNRESET.
func connReset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// connGetBody sends a GET to u and, when the response arrives, calls
// gotHeaders (if not nil) and reads the whole body, returning the first error.
func connGetBody(t *testing.T, u string, gotHeaders func()) error {
	t.Helper()
	resp, err := connClient().Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if gotHeaders != nil {
		gotHeaders()
	}
	_, err = io.ReadAll(resp.Body)
	return err
}

// connFailingResolver is a pure-Go resolver whose every query fails at once
// without touching the network.
func connFailingResolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS server in this test")
		},
	}
}

// connChain lists the types in err's chain, outermost first, for messages.
func connChain(err error) string {
	var parts []string
	for err != nil {
		name := fmt.Sprintf("%T", err)
		if v := reflect.ValueOf(err); v.Kind() == reflect.Uintptr {
			name += fmt.Sprintf("(%v)", err)
		}
		parts = append(parts, name)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			parts = append(parts, fmt.Sprintf("%d joined errors", len(u.Unwrap())))
			err = nil
		default:
			err = nil
		}
	}
	return strings.Join(parts, " -> ")
}

func connAs[E any](err error) bool {
	var e E
	return errors.As(err, &e)
}

func connDialOp(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

type connCase struct {
	name string
	// make produces the error, for real where it can.
	make func(t *testing.T) error
	// shape reports whether the error is the failure the case is about; it
	// guards against a scenario that silently produced something else.
	shape func(err error) bool
	want  bool
}

func connCases() []connCase {
	return []connCase{
		// ---- failures of the connection: true ----
		{
			// *url.Error -> *net.OpError(dial) -> *os.SyscallError(connect) -> syscall.Errno(ECONNREFUSED)
			name: "refused/http.Get",
			make: func(t *testing.T) error {
				_, err := connClient().Get("http://" + connRefusedAddr(t))
				return err
			},
			shape: func(err error) bool {
				return connAs[*url.Error](err) && connDialOp(err) && errors.Is(err, syscall.ECONNREFUSED)
			},
			want: true,
		},
		{
			// *net.OpError(dial) -> *os.SyscallError(connect) -> syscall.Errno(ECONNREFUSED)
			name: "refused/net.Dial",
			make: func(t *testing.T) error {
				c, err := net.Dial("tcp", connRefusedAddr(t))
				if err == nil {
					c.Close()
				}
				return err
			},
			shape: func(err error) bool { return connDialOp(err) && errors.Is(err, syscall.ECONNREFUSED) },
			want:  true,
		},
		{
			// Headers and 7 of 1000 body bytes, then RST once the client
			// holds the response; reading the body gives, unwrapped by
			// net/http: *net.OpError(read) -> *os.SyscallError(read) ->
			// syscall.Errno(ECONNRESET).
			name: "reset/mid-body",
			make: func(t *testing.T) error {
				headersRead := make(chan struct{})
				var once sync.Once
				release := func() { once.Do(func() { close(headersRead) }) }
				t.Cleanup(release)
				srv := connHijack(t, func(c *net.TCPConn, w *bufio.Writer) {
					_, _ = w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
					_ = w.Flush()
					<-headersRead
					connReset(c)
				})
				return connGetBody(t, srv.URL, release)
			},
			shape: func(err error) bool {
				return !connAs[*url.Error](err) && connAs[*net.OpError](err) && errors.Is(err, syscall.ECONNRESET)
			},
			want: true,
		},
		{
			// RST instead of any response:
			// *url.Error -> *net.OpError(read) -> *os.SyscallError(read) -> syscall.Errno(ECONNRESET)
			name: "reset/before-response",
			make: func(t *testing.T) error {
				srv := connHijack(t, func(c *net.TCPConn, _ *bufio.Writer) { connReset(c) })
				return connGetBody(t, srv.URL, nil)
			},
			shape: func(err error) bool {
				return connAs[*url.Error](err) && connAs[*net.OpError](err) && errors.Is(err, syscall.ECONNRESET)
			},
			want: true,
		},
		{
			// Content-Length: 100, then 10 bytes and FIN; reading the body
			// gives the bare sentinel: *errors.errorString (io.ErrUnexpectedEOF).
			name: "unexpected-EOF/body",
			make: func(t *testing.T) error {
				srv := connHijack(t, func(_ *net.TCPConn, w *bufio.Writer) {
					_, _ = w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
					_ = w.Flush()
				})
				return connGetBody(t, srv.URL, nil)
			},
			shape: func(err error) bool { return err == io.ErrUnexpectedEOF },
			want:  true,
		},
		{
			// The status line and FIN, no end of headers:
			// *url.Error -> *fmt.wrapError ("net/http: HTTP/1.x transport
			// connection broken") -> *errors.errorString (io.ErrUnexpectedEOF).
			name: "unexpected-EOF/headers",
			make: func(t *testing.T) error {
				srv := connHijack(t, func(_ *net.TCPConn, w *bufio.Writer) {
					_, _ = w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
					_ = w.Flush()
				})
				return connGetBody(t, srv.URL, nil)
			},
			shape: func(err error) bool { return connAs[*url.Error](err) && errors.Is(err, io.ErrUnexpectedEOF) },
			want:  true,
		},
		{
			// The server reads the request, then closes (FIN) without a
			// byte of answer: *url.Error -> *errors.errorString (io.EOF).
			name: "EOF/closed-before-answer",
			make: func(t *testing.T) error {
				srv := connHijack(t, func(*net.TCPConn, *bufio.Writer) {})
				return connGetBody(t, srv.URL, nil)
			},
			shape: func(err error) bool {
				var ue *url.Error
				return errors.As(err, &ue) && ue.Err == io.EOF
			},
			want: true,
		},
		{
			// A write after the peer's RST has been read:
			// *net.OpError(write) -> *os.SyscallError(write) -> syscall.Errno(EPIPE).
			name: "broken-pipe",
			make: func(t *testing.T) error {
				c := connAfterReset(t)
				_, err := c.Write([]byte("more"))
				return err
			},
			shape: func(err error) bool { return connAs[*net.OpError](err) && errors.Is(err, syscall.EPIPE) },
			want:  true,
		},
		{
			// A read on a connection this side closed:
			// *net.OpError(read) -> poll.errNetClosing (net.ErrClosed).
			name: "use-of-closed-connection",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				c.Close()
				_, err = c.Read(make([]byte, 1))
				return err
			},
			shape: func(err error) bool { return connAs[*net.OpError](err) && errors.Is(err, net.ErrClosed) },
			want:  true,
		},
		{
			// A 1 ns dial timeout has passed before the connect starts, so
			// this is deterministic: *net.OpError(dial) -> *net.timeoutError
			// ("i/o timeout", which matches context.DeadlineExceeded).
			name: "dial-timeout/net.Dialer",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				d := net.Dialer{Timeout: time.Nanosecond}
				c, err := d.Dial("tcp", srv.Listener.Addr().String())
				if err == nil {
					c.Close()
				}
				return err
			},
			shape: func(err error) bool {
				var ne net.Error
				return connDialOp(err) && errors.As(err, &ne) && ne.Timeout()
			},
			want: true,
		},
		{
			// The same through a Transport:
			// *url.Error -> *net.OpError(dial) -> *net.timeoutError.
			name: "dial-timeout/http.Transport",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				tr := &http.Transport{DialContext: (&net.Dialer{Timeout: time.Nanosecond}).DialContext}
				t.Cleanup(tr.CloseIdleConnections)
				resp, err := (&http.Client{Transport: tr, Timeout: connClientTimeout}).Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				return err
			},
			shape: func(err error) bool {
				var ne net.Error
				return connAs[*url.Error](err) && connDialOp(err) && errors.As(err, &ne) && ne.Timeout()
			},
			want: true,
		},
		{
			// A resolver that cannot reach any server, offline:
			// *net.DNSError (Err "no DNS server in this test").
			name: "DNS/lookup",
			make: func(t *testing.T) error {
				_, err := connFailingResolver().LookupHost(context.Background(), "retries-test.invalid")
				return err
			},
			shape: func(err error) bool { return connAs[*net.DNSError](err) },
			want:  true,
		},
		{
			// The same inside a dial: *net.OpError(dial) -> *net.DNSError.
			name: "DNS/dial",
			make: func(t *testing.T) error {
				d := net.Dialer{Resolver: connFailingResolver()}
				c, err := d.Dial("tcp", "retries-test.invalid:80")
				if err == nil {
					c.Close()
				}
				return err
			},
			shape: func(err error) bool { return connDialOp(err) && connAs[*net.DNSError](err) },
			want:  true,
		},

		// ---- not failures of the connection: false ----
		{
			name:  "nil",
			make:  func(*testing.T) error { return nil },
			shape: func(err error) bool { return err == nil },
		},
		{
			name:  "plain error",
			make:  func(*testing.T) error { return errors.New("bad value") },
			shape: func(err error) bool { return err != nil },
		},
		{
			// pyvespa retries this one because of the substring.
			name:  "message mentions connection",
			make:  func(*testing.T) error { return errors.New("invalid connection string") },
			shape: func(err error) bool { return err != nil },
		},
		{
			// pyvespa retries this one because of the substring.
			name:  "message mentions error sending request",
			make:  func(*testing.T) error { return errors.New("error sending request for url") },
			shape: func(err error) bool { return err != nil },
		},
		{
			name:  "context.Canceled",
			make:  func(*testing.T) error { return context.Canceled },
			shape: func(err error) bool { return err == context.Canceled },
		},
		{
			name:  "context.DeadlineExceeded",
			make:  func(*testing.T) error { return context.DeadlineExceeded },
			shape: func(err error) bool { return err == context.DeadlineExceeded },
		},
		{
			// *url.Error -> *errors.errorString (context.Canceled); nothing is sent.
			name: "canceled/before-sending",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return connDo(t, ctx, srv.URL)
			},
			shape: func(err error) bool {
				var ue *url.Error
				return errors.As(err, &ue) && ue.Err == context.Canceled
			},
		},
		{
			// Canceled once the server holds the request:
			// *url.Error -> *errors.errorString (context.Canceled).
			name: "canceled/while-waiting",
			make: func(t *testing.T) error {
				arrived := make(chan struct{})
				srv := connServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(arrived)
					<-r.Context().Done()
				}))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					select {
					case <-arrived:
						cancel()
					case <-ctx.Done():
					}
				}()
				return connDo(t, ctx, srv.URL)
			},
			shape: func(err error) bool {
				var ue *url.Error
				return errors.As(err, &ue) && ue.Err == context.Canceled
			},
		},
		{
			// A dial under a canceled context is a dial error, but it
			// matches context.Canceled, which wins:
			// *net.OpError(dial) -> net.canceledError.
			name: "canceled/dial",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
				if err == nil {
					c.Close()
				}
				return err
			},
			shape: func(err error) bool { return connDialOp(err) && errors.Is(err, context.Canceled) },
		},
		{
			// The caller's deadline, already past:
			// *url.Error -> context.deadlineExceededError.
			name: "deadline/caller-context",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.NotFoundHandler())
				ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
				defer cancel()
				return connDo(t, ctx, srv.URL)
			},
			shape: func(err error) bool {
				var ue *url.Error
				return errors.As(err, &ue) && ue.Err == context.DeadlineExceeded
			},
		},
		{
			// http.Client.Timeout is the caller's own deadline too:
			// *url.Error -> *http.timeoutError ("context deadline exceeded
			// (Client.Timeout exceeded while awaiting headers)").
			name: "deadline/client-timeout",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					<-r.Context().Done()
				}))
				resp, err := (&http.Client{Timeout: time.Nanosecond}).Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				return err
			},
			shape: func(err error) bool {
				var ne net.Error
				return connAs[*url.Error](err) && errors.As(err, &ne) && ne.Timeout() &&
					errors.Is(err, context.DeadlineExceeded) && !connAs[*net.OpError](err)
			},
		},
		{
			// A default client does not trust httptest's certificate:
			// *url.Error -> *tls.CertificateVerificationError -> x509.UnknownAuthorityError.
			name: "TLS/unknown-authority",
			make: func(t *testing.T) error {
				srv := connServer(t, true, http.NotFoundHandler())
				return connDo(t, context.Background(), srv.URL)
			},
			shape: func(err error) bool {
				return connAs[*tls.CertificateVerificationError](err) && connAs[x509.UnknownAuthorityError](err)
			},
		},
		{
			// A client that trusts the certificate but expects another name:
			// *url.Error -> *tls.CertificateVerificationError -> x509.HostnameError.
			name: "TLS/wrong-hostname",
			make: func(t *testing.T) error {
				srv := connServer(t, true, http.NotFoundHandler())
				tr := srv.Client().Transport.(*http.Transport).Clone()
				tr.TLSClientConfig.ServerName = "not-this-server.invalid"
				t.Cleanup(tr.CloseIdleConnections)
				resp, err := (&http.Client{Transport: tr, Timeout: connClientTimeout}).Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				return err
			},
			shape: func(err error) bool {
				return connAs[*tls.CertificateVerificationError](err) && connAs[x509.HostnameError](err)
			},
		},
		{
			// A 500 from a real server through CheckStatus: *retries.StatusError.
			name: "status/500",
			make: func(t *testing.T) error {
				srv := connServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "boom", http.StatusInternalServerError)
				}))
				resp, err := connClient().Get(srv.URL)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				return retries.CheckStatus(resp)
			},
			shape: func(err error) bool {
				var se *retries.StatusError
				return errors.As(err, &se) && se.StatusCode == http.StatusInternalServerError
			},
		},
	}
}

// connDo sends a GET to u with ctx and returns the error.
func connDo(t *testing.T, ctx context.Context, u string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	resp, err := connClient().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// connAfterReset returns a client connection whose peer has reset it, after
// reading the reset (ECONNRESET) so that the next write fails with EPIPE.
func connAfterReset(t *testing.T) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// Wait for the client's byte, so that the reset cannot reach the
		// client while it is still connecting (its dial would then fail
		// with ECONNRESET).
		_ = c.SetDeadline(time.Now().Add(connClientTimeout))
		_, _ = c.Read(make([]byte, 1))
		connReset(c.(*net.TCPConn))
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), connClientTimeout)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(connClientTimeout))
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write before the reset: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer's reset = %v (%s), want ECONNRESET", err, connChain(err))
	}
	return c
}

func TestIsConnectionErrorRealFailures(t *testing.T) {
	for _, tc := range connCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make(t)
			if !tc.shape(err) {
				t.Fatalf("the scenario produced %v (%s), not the failure this case is about", err, connChain(err))
			}
			t.Logf("%v: %s", err, connChain(err))
			if got := retries.IsConnectionError(err); got != tc.want {
				t.Errorf("IsConnectionError(%v) = %v, want %v; chain %s", err, got, tc.want, connChain(err))
			}
			if err == nil {
				return
			}
			// Wrapping keeps the answer, whether by %w, by errors.Join,
			// or twice over.
			for _, wrapped := range []error{
				fmt.Errorf("feed document: %w", err),
				fmt.Errorf("visit: %w", fmt.Errorf("page 3: %w", err)),
				errors.Join(errors.New("while closing"), err),
			} {
				if got := retries.IsConnectionError(wrapped); got != tc.want {
					t.Errorf("IsConnectionError(%v) = %v, want %v", wrapped, got, tc.want)
				}
			}
		})
	}
}

// TestIsConnectionErrorExclusionsWin checks that a connection failure joined
// with one of the excluded errors is not retried: the caller's cancellation,
// a certificate error or a status error outweighs the connection failure.
func TestIsConnectionErrorExclusionsWin(t *testing.T) {
	refused := func(t *testing.T) error {
		t.Helper()
		c, err := net.Dial("tcp", connRefusedAddr(t))
		if err == nil {
			c.Close()
			t.Fatal("Dial to a closed port succeeded")
		}
		if !retries.IsConnectionError(err) {
			t.Fatalf("IsConnectionError(%v) = false, want true", err)
		}
		return err
	}
	tests := []struct {
		name  string
		other error
	}{
		{"context.Canceled", context.Canceled},
		{"StatusError", &retries.StatusError{StatusCode: http.StatusServiceUnavailable}},
		{"UnknownAuthorityError", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := errors.Join(refused(t), tc.other)
			if retries.IsConnectionError(err) {
				t.Errorf("IsConnectionError(%v) = true, want false", err)
			}
		})
	}
}

// TestIsConnectionErrorDialMistakes checks that a dial that could not start
// because of the program's own mistake is not a connection error.
func TestIsConnectionErrorDialMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1"},            // missing port: *net.AddrError
		{"tcp", "127.0.0.1:99999"},      // invalid port
		{"bogus", "127.0.0.1:80"},       // net.UnknownNetworkError
		{"ip:nosuchproto", "127.0.0.1"}, // unknown protocol
	} {
		_, err := net.Dial(tc.network, tc.addr)
		if err == nil {
			t.Fatalf("net.Dial(%q, %q) succeeded", tc.network, tc.addr)
		}
		if retries.IsConnectionError(err) {
			t.Errorf("IsConnectionError(%v) = true, want false", err)
		}
	}
}
