package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// passwordEnv is the environment variable that holds the SASL password
// when -sasl-password-file is not given: a secret stays out of argv.
const passwordEnv = "RETRIES_KAFKA_SASL_PASSWORD"

// brokerFlags are the flags of the connection to the Kafka brokers.
type brokerFlags struct {
	tls                bool
	ca, cert, key      string
	mechanism, user    string
	passwordFile       string
	startAt, tombstone string
}

func (b *brokerFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&b.tls, "kafka-tls", false, "speak TLS to the brokers, trusting the system's CAs (implied by -kafka-ca, -kafka-cert)")
	fs.StringVar(&b.ca, "kafka-ca", "", "trust the CA certificates of this PEM `FILE` for the brokers")
	fs.StringVar(&b.cert, "kafka-cert", "", "the client certificate, a PEM `FILE`, for mutual TLS with the brokers")
	fs.StringVar(&b.key, "kafka-key", "", "its private key, a PEM `FILE`")
	fs.StringVar(&b.mechanism, "sasl", "", "authenticate to the brokers with SASL `MECHANISM`: plain, scram-sha-256 or scram-sha-512")
	fs.StringVar(&b.user, "sasl-user", "", "the SASL `USER`")
	fs.StringVar(&b.passwordFile, "sasl-password-file", "", "read the SASL password from `FILE` (its first line); without it, from $"+passwordEnv+"; never printed")
	fs.StringVar(&b.startAt, "start-offset", "earliest", "where a group with no committed offset starts a partition: `earliest` or latest")
	fs.StringVar(&b.tombstone, "tombstones", "deadletter", "what a record with a null value becomes: `deadletter` or remove (of the document its key names)")
}

// opts returns the Kafka client options of the flags.
func (b *brokerFlags) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if b.tls || b.ca != "" || b.cert != "" || b.key != "" {
		c, err := brokerTLS(b.ca, b.cert, b.key)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if b.mechanism == "" {
		if b.user != "" || b.passwordFile != "" {
			return nil, errors.New("-sasl-user and -sasl-password-file need -sasl")
		}
		return opts, nil
	}
	if b.user == "" {
		return nil, errors.New("-sasl needs -sasl-user")
	}
	pass, err := b.password()
	if err != nil {
		return nil, err
	}
	var m sasl.Mechanism
	switch strings.ToLower(b.mechanism) {
	case "plain":
		m = plain.Auth{User: b.user, Pass: pass}.AsMechanism()
	case "scram-sha-256":
		m = scram.Auth{User: b.user, Pass: pass}.AsSha256Mechanism()
	case "scram-sha-512":
		m = scram.Auth{User: b.user, Pass: pass}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("-sasl %q: want plain, scram-sha-256 or scram-sha-512", b.mechanism)
	}
	return append(opts, kgo.SASL(m)), nil
}

// password returns the SASL password, from -sasl-password-file or the
// environment. No error names it.
func (b *brokerFlags) password() (string, error) {
	if b.passwordFile == "" {
		if p, ok := os.LookupEnv(passwordEnv); ok {
			return p, nil
		}
		return "", fmt.Errorf("-sasl needs -sasl-password-file or $%s", passwordEnv)
	}
	data, err := os.ReadFile(b.passwordFile)
	if err != nil {
		return "", fmt.Errorf("-sasl-password-file: %v", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// brokerTLS returns the TLS configuration for the brokers.
func brokerTLS(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if (cert == "") != (key == "") {
		return nil, errors.New("-kafka-cert and -kafka-key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("-kafka-cert/-kafka-key: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("-kafka-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-kafka-ca: %s holds no PEM certificate", ca)
		}
		c.RootCAs = pool
	}
	return c, nil
}
