package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key in PEM signed by ca, for the server
// (127.0.0.1) or a client.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writePEM writes data to a new file in dir and returns its path.
func writePEM(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mtlsServer is a document/v1 server on 127.0.0.1 that requires a client
// certificate signed by clientCA. It counts handshakes and the HTTP/2
// requests among those it answers.
type mtlsServer struct {
	*httptest.Server
	handshakes, requests, h2 atomic.Int64
	mu                       sync.Mutex
	clients                  []string // the client certificates' names, by request
}

func newMTLSServer(t *testing.T, serverCA, clientCA *testCA) *mtlsServer {
	t.Helper()
	s := &mtlsServer{}
	certPEM, keyPEM := serverCA.issue(t, "server", true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.ProtoMajor == 2 {
			s.h2.Add(1)
		}
		s.mu.Lock()
		s.clients = append(s.clients, r.TLS.PeerCertificates[0].Subject.CommonName)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pathId":"` + r.URL.Path + `"}`))
	}))
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		NextProtos: []string{"h2", "http/1.1"},
		VerifyConnection: func(tls.ConnectionState) error {
			s.handshakes.Add(1)
			return nil
		},
	}
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// TestFeedMutualTLS feeds over https with a client certificate, a CA and
// HTTP/2 by ALPN; a missing or refused certificate, or a server the CA does
// not vouch for, ends the feed at once with exit 2, and few handshakes.
func TestFeedMutualTLS(t *testing.T) {
	t.Parallel()
	serverCA, clientCA, otherCA := newTestCA(t), newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	ca := writePEM(t, dir, "ca.pem", serverCA.pem)
	c, k := clientCA.issue(t, "feeder", false)
	cert, key := writePEM(t, dir, "client.pem", c), writePEM(t, dir, "client.key", k)
	oc, ok := otherCA.issue(t, "stranger", false)
	otherCert, otherKey := writePEM(t, dir, "other.pem", oc), writePEM(t, dir, "other.key", ok)
	wrongCA := writePEM(t, dir, "wrong-ca.pem", otherCA.pem)
	var in strings.Builder
	for i := range 100 {
		in.WriteString(`{"put":"id:a:b::` + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + `","fields":{}}` + "\n")
	}
	input := writeFile(t, in.String())

	t.Run("good", func(t *testing.T) {
		t.Parallel()
		srv := newMTLSServer(t, serverCA, clientCA)
		code, _, stderr := runCmd(t, "feed", "-q", "-url", srv.URL, "-cert", cert, "-key", key, "-ca", ca, input)
		if code != exitOK || srv.requests.Load() != 100 || srv.h2.Load() != 100 {
			t.Errorf("exit status %d, %d requests (%d over HTTP/2), want 0, 100, 100; stderr:\n%s", code, srv.requests.Load(), srv.h2.Load(), stderr)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no_client_certificate", []string{"-ca", ca}, "retries: feed: TLS: "},
		{"refused_client_certificate", []string{"-cert", otherCert, "-key", otherKey, "-ca", ca}, "retries: feed: TLS: "},
		{"untrusted_server", []string{"-cert", cert, "-key", key, "-ca", wrongCA}, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newMTLSServer(t, serverCA, clientCA)
			args := append(append([]string{"feed", "-q", "-url", srv.URL}, tc.args...), input)
			code, _, stderr := runCmd(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "retries feed: stopping: TLS: ") {
				t.Errorf("exit status %d, want %d and %q; stderr:\n%s", code, exitUsage, tc.want, stderr)
			}
			if strings.Contains(stderr, "usage:") {
				t.Errorf("a TLS error printed the usage:\n%s", stderr)
			}
			// The limiter starts at 4 in flight: a handful of handshakes,
			// never three per operation.
			if n := srv.handshakes.Load() + srv.requests.Load(); n > 10 {
				t.Errorf("%d handshakes and requests for 100 operations, want a handful", n)
			}
		})
	}
	t.Run("flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"-url", "http://127.0.0.1:1", "-ca", ca, input},
			{"-url", "https://127.0.0.1:1", "-cert", cert, input},
			{"-url", "https://127.0.0.1:1", "-cert", key, "-key", key, input},
			{"-url", "https://127.0.0.1:1", "-ca", key, input},
		} {
			if code, _, stderr := runCmd(t, append([]string{"feed", "-q"}, args...)...); code != exitUsage {
				t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, code, exitUsage, stderr)
			}
		}
	})
}

// TestCertFilesRotate: a certificate replaced on disk is used from the
// next look on, and one caught half-written keeps the one before.
func TestCertFilesRotate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	c1, k1 := ca.issue(t, "first", false)
	cert, key := writePEM(t, dir, "c.pem", c1), writePEM(t, dir, "c.key", k1)
	files, err := loadCertFiles(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	name := func(now time.Time) string {
		p, err := files.get(now)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(p.Certificate[0])
		return x.Subject.CommonName
	}
	now := time.Now()
	c2, k2 := ca.issue(t, "second", false)
	writePEM(t, dir, "c.pem", c2)
	writePEM(t, dir, "c.key", k2)
	later := now.Add(time.Hour) // a new modification time
	_ = os.Chtimes(cert, later, later)
	_ = os.Chtimes(key, later, later)
	if got := name(now); got != "first" {
		t.Errorf("within the interval: %q, want first", got)
	}
	if got := name(now.Add(2 * time.Second)); got != "second" {
		t.Errorf("after the rotation: %q, want second", got)
	}
	writePEM(t, dir, "c.pem", []byte("half written"))
	evenLater := later.Add(time.Hour)
	_ = os.Chtimes(cert, evenLater, evenLater)
	if got := name(now.Add(4 * time.Second)); got != "second" {
		t.Errorf("a half-written file: %q, want second kept", got)
	}
}
