package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seed32e55400/retries/feed/feedtest"
)

// selfSigned returns a TLS certificate for 127.0.0.1 signed by itself, and
// its PEM.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestBrokersTLSAndSASL: a member reaches brokers that speak only TLS and
// want SASL SCRAM-SHA-256, with the CA and the password from files, and
// feeds; the password appears nowhere in what it prints.
func TestBrokersTLSAndSASL(t *testing.T) {
	t.Parallel()
	cert, caPEM := selfSigned(t)
	const user, pass = "feeder", "s3cr3t-passw0rd"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "ops", "dead"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, pass), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("ops"),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := prod.ProduceSync(t.Context(), &kgo.Record{Value: []byte(fmt.Sprintf(`{"put":"id:a:b::p%d","fields":{}}`, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	var mu sync.Mutex
	applied := map[string]bool{}
	all := make(chan struct{})
	srv := feedtest.New(t, func(r *http.Request, _ int) int {
		mu.Lock()
		defer mu.Unlock()
		if applied[r.URL.Path] = true; len(applied) == n {
			close(all)
		}
		return 0
	})
	dir := t.TempDir()
	caFile, passFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "pass")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, t.Context(), []string{"-brokers", strings.Join(addrs, ","), "-topic", "ops", "-group", "g", "-url", srv.URL,
			"-failed-topic", "dead", "-session-timeout", "1s", "-progress", "0",
			"-kafka-ca", caFile, "-sasl", "scram-sha-256", "-sasl-user", user, "-sasl-password-file", passFile}, &stdout, &stderr)
	}()
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Fatalf("not fed within a minute; stderr:\n%s", stderr.String())
	}
	cancel()
	if got := <-code; got != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", got, stderr.String())
	}
	if strings.Contains(stderr.String()+stdout.String(), pass) {
		t.Errorf("the password was printed:\n%s", stderr.String())
	}
}

// TestBrokerFlagsRefused: SASL without a user or a password, or with an
// unknown mechanism, and a -tombstones or -start-offset that means
// nothing, are usage errors that name no secret.
func TestBrokerFlagsRefused(t *testing.T) {
	base := []string{"-brokers", "127.0.0.1:1", "-topic", "ops", "-group", "g", "-url", "http://127.0.0.1:1", "-failed-topic", "dead"}
	t.Setenv(passwordEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-sasl", "plain"}, "-sasl needs -sasl-user"},
		{[]string{"-sasl", "gssapi", "-sasl-user", "u"}, `-sasl "gssapi"`},
		{[]string{"-sasl-user", "u"}, "need -sasl"},
		{[]string{"-tombstones", "keep"}, `-tombstones "keep"`},
		{[]string{"-start-offset", "middle"}, `-start-offset "middle"`},
		{[]string{"-kafka-cert", "c.pem"}, "-kafka-cert and -kafka-key go together"},
	} {
		var stdout, stderr lockedBuffer
		if got := run(t.Context(), t.Context(), append(base, tc.args...), &stdout, &stderr); got != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, got, stderr.String(), tc.want)
		}
	}
}
