package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// certFiles is a client certificate and key read from PEM files, and read
// again when either file changes, so that a certificate rotated on disk
// (as Vespa Cloud rotates them) is used from the next connection on,
// without a restart.
type certFiles struct {
	cert, key string

	mu       sync.Mutex
	pair     *tls.Certificate
	modCert  time.Time
	modKey   time.Time
	checked  time.Time
	interval time.Duration // between looks at the files; 0: every handshake
}

// loadCertFiles reads the pair once, so that a wrong file is an error
// before the feed starts.
func loadCertFiles(cert, key string) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key, interval: time.Second}
	if _, err := c.get(time.Now()); err != nil {
		return nil, err
	}
	return c, nil
}

// get returns the pair, read again if a file changed since it was read.
// If the files changed but do not load (a rotation caught half-written),
// the pair read before is kept and tried again at the next look.
func (c *certFiles) get(now time.Time) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pair != nil && now.Sub(c.checked) < c.interval {
		return c.pair, nil
	}
	c.checked = now
	ci, err := os.Stat(c.cert)
	if err != nil {
		return c.keep(err)
	}
	ki, err := os.Stat(c.key)
	if err != nil {
		return c.keep(err)
	}
	if c.pair != nil && ci.ModTime().Equal(c.modCert) && ki.ModTime().Equal(c.modKey) {
		return c.pair, nil
	}
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		return c.keep(err)
	}
	c.pair, c.modCert, c.modKey = &pair, ci.ModTime(), ki.ModTime()
	return c.pair, nil
}

// keep returns the pair read before, or err if there is none. c.mu is held.
func (c *certFiles) keep(err error) (*tls.Certificate, error) {
	if c.pair != nil {
		return c.pair, nil
	}
	return nil, err
}

// loadTLS returns the TLS configuration of -cert, -key and -ca, or nil when
// none is given.
func loadTLS(cert, key, ca string) (*tls.Config, error) {
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("-cert and -key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cert != "" {
		files, err := loadCertFiles(cert, key)
		if err != nil {
			return nil, fmt.Errorf("-cert/-key: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return files.get(time.Now())
		}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
