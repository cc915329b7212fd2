// Command retries-kafka feeds Vespa from a Kafka topic as a member of a
// consumer group: run one process per member, with the same -group, and
// Kafka spreads the topic's partitions over them.
//
//	retries-kafka -brokers HOST:PORT[,...] -topic T -group G -url URL [-failed-topic T2 | -failed FILE] [flags]
//
// It commits an offset only once every record below it is acknowledged or
// dead-lettered. The first SIGINT or SIGTERM stops fetching, finishes the
// operations in flight, commits, leaves the group and prints the summary; a
// second one stops the operations in flight too, after -grace. Exit status:
// 0 when it stopped cleanly, 1 when a dead letter could not be written
// (kafka.ErrDeadLetter), 2 for a usage error or a group that refuses the
// member (kafka.ErrGroupRefused: a -session-timeout out of the brokers'
// range, say), 4 when no broker could be reached for longer than
// -max-outage (kafka.ErrBrokersOut).
//
// Brokers that want TLS or SASL: -kafka-tls, -kafka-ca, -kafka-cert and
// -kafka-key; -sasl plain|scram-sha-256|scram-sha-512 with -sasl-user and
// the password in -sasl-password-file or $RETRIES_KAFKA_SASL_PASSWORD.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/seed32e55400/retries/feed"
	"github.com/seed32e55400/retries/kafka"
)

// helpText is what -h prints before the flags.
const helpText = `usage: retries-kafka -brokers HOST:PORT[,...] -topic T -group G -url URL [-failed-topic T2 | -failed FILE] [flags]

Feeds Vespa from a Kafka topic as a member of a consumer group: run one
process per member, with the same -group. An offset is committed only once
every record below it is acknowledged or dead-lettered. The first SIGINT or
SIGTERM finishes the operations in flight, commits and leaves the group; a
second one stops the operations in flight too, after -grace.

exit status:
  0  stopped cleanly
  1  a dead letter could not be written
  2  bad flags, or a group that refuses the member (a -session-timeout
     out of the brokers' range, a group id or rights they refuse)
  4  no broker reached for longer than -max-outage

flags:
`

func main() {
	ctx, stop := context.WithCancel(context.Background())
	force, stopForce := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "retries-kafka: stopping: finishing the operations in flight; interrupt again to stop them")
		stop()
		<-sigs
		stopForce()
	}()
	os.Exit(run(ctx, force, os.Args[1:], os.Stdout, os.Stderr))
}

// list collects repeated flags, or comma-separated values.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// headers collects -header flags; neither String nor its errors show a
// value, which may be a secret.
type headers struct {
	h   http.Header
	n   int
	err error
}

func (h *headers) String() string { return "" }

func (h *headers) Set(s string) error {
	h.n++
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		if h.err == nil {
			h.err = fmt.Errorf("-header number %d: want 'Name: value'", h.n)
		}
		return nil
	}
	if h.h == nil {
		h.h = http.Header{}
	}
	h.h.Add(name, value)
	return nil
}

// run is the command; it returns the exit status.
func run(ctx, force context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("retries-kafka", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var brokers, urls list
	var hdr headers
	fs.Var(&brokers, "brokers", "the Kafka seed brokers, `HOST:PORT[,...]` (required)")
	topic := fs.String("topic", "", "the `TOPIC` of feed operations, one a record (required)")
	group := fs.String("group", "", "the consumer `GROUP` (required)")
	fs.Var(&urls, "url", "the document/v1 `URL` (required); repeat it for several endpoints")
	failedTopic := fs.String("failed-topic", "", "produce each record that fails or is malformed to `TOPIC`, with a retries-failed-reason header")
	failed := fs.String("failed", "", "append each record that fails or is malformed to `FILE`, one a line (when there is no -failed-topic)")
	http2 := fs.Bool("http2", false, "HTTP/2 without TLS on http URLs (prior knowledge)")
	concurrency := fs.Int("concurrency", 0, "`N` requests in flight, fixed; 0: the adaptive limiter decides")
	connections := fs.Int("connections", 0, "`N` connections per endpoint; 0: the feed's default")
	timeout := fs.Duration("timeout", 2*time.Minute, "time limit of each operation, its retries included; also the longest a revoke waits for a partition's operations")
	maxOutage := fs.Duration("max-outage", 0, "end the member when the server has been out for this long; 0: wait for ever, the records staying in Kafka")
	grace := fs.Duration("grace", 5*time.Second, "after a second interrupt, how long the requests on the wire may take")
	progress := fs.Duration("progress", 10*time.Second, "time between progress reports on stderr; 0: none")
	progressJSON := fs.Bool("progress-json", false, "write each progress report as one JSON line: the summary's keys so far and kafka.lag.partitions")
	session := fs.Duration("session-timeout", kafka.DefaultSessionTimeout, "the group's session timeout: how soon a member that dies is replaced")
	fs.Var(&hdr, "header", "`Name: value` sent with every request (repeatable); never printed")
	cert := fs.String("cert", "", "the client certificate, a PEM `FILE`, for mutual TLS with Vespa")
	key := fs.String("key", "", "its private key, a PEM `FILE`")
	ca := fs.String("ca", "", "trust the CA certificates of this PEM `FILE` for Vespa")
	var bf brokerFlags
	bf.add(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, helpText)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		synopsis, _, _ := strings.Cut(helpText, "\n")
		fmt.Fprintf(stderr, "retries-kafka: %v\n%s\n'retries-kafka -h' says what it does, its flags and its exit statuses\n", err, synopsis)
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "retries-kafka: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected argument %q", fs.Arg(0))
	case len(brokers) == 0 || *topic == "" || *group == "" || len(urls) == 0:
		return usage("-brokers, -topic, -group and -url are required")
	case (*failedTopic == "") == (*failed == ""):
		return usage("give one of -failed-topic and -failed: a record that fails must go somewhere")
	case hdr.err != nil:
		return usage("%v", hdr.err)
	}
	tlsCfg, err := vespaTLS(*cert, *key, *ca)
	if err != nil {
		return usage("%v", err)
	}
	kopts, err := bf.opts()
	if err != nil {
		return usage("%v", err)
	}
	var tombstones kafka.Tombstones
	switch bf.tombstone {
	case "deadletter":
	case "remove":
		tombstones = kafka.TombstonesRemove
	default:
		return usage("-tombstones %q: want deadletter or remove", bf.tombstone)
	}
	if bf.startAt != "earliest" && bf.startAt != "latest" {
		return usage("-start-offset %q: want earliest or latest", bf.startAt)
	}
	orNone := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	cfg := kafka.Config{
		Brokers: brokers, Topic: *topic, Group: *group, FailedTopic: *failedTopic, SessionTimeout: *session, Log: stderr,
		Feed: feed.Config{URL: urls[0], Header: hdr.h, TLS: tlsCfg, HTTP2: *http2, Concurrency: *concurrency, Connections: *connections,
			Timeout: orNone(*timeout), MaxOutage: orNone(*maxOutage), Grace: orNone(*grace), Log: stderr},
		Progress: *progress, ProgressJSON: *progressJSON, ClientOpts: kopts, Tombstones: tombstones, StartAtEnd: bf.startAt == "latest",
	}
	if len(urls) > 1 {
		cfg.Feed.URLs = urls
	}
	if *failed != "" {
		f, err := os.OpenFile(*failed, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return usage("-failed: %v", err)
		}
		defer f.Close()
		cfg.Failed = f
	}
	res, err := kafka.Run(ctx, force, cfg)
	if errors.Is(err, kafka.ErrBrokersOut) {
		fmt.Fprintf(stderr, "retries-kafka: stopped: %s\n", strings.TrimPrefix(err.Error(), "kafka: "))
		_, _ = stdout.Write(res.Summary())
		return 4
	}
	if errors.Is(err, kafka.ErrGroupRefused) {
		fmt.Fprintf(stderr, "retries-kafka: %s\n", strings.TrimPrefix(err.Error(), "kafka: "))
		_, _ = stdout.Write(res.Summary())
		return 2
	}
	if errors.Is(err, kafka.ErrDeadLetter) {
		fmt.Fprintf(stderr, "retries-kafka: %v\n", err)
		_, _ = stdout.Write(res.Summary())
		return 1
	}
	if err != nil {
		return usage("%v", err)
	}
	_, _ = stdout.Write(res.Summary())
	return 0
}

// vespaTLS returns the TLS configuration of the flags, or nil for Go's
// defaults.
func vespaTLS(cert, key, ca string) (*tls.Config, error) {
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if (cert == "") != (key == "") {
		return nil, errors.New("-cert and -key go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("-cert/-key: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca: %s holds no PEM certificate", ca)
		}
		c.RootCAs = pool
	}
	return c, nil
}
