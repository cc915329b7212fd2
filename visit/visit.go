// Package visit reads a corpus out of Vespa through document/v1's visits:
// the corpus split into slices visited at once, each paged through with
// continuation tokens, through the retry layers of package retries. It
// hands out each page's documents with the progress that covers them, so
// that a caller persists the progress only once the documents are safe,
// and resumes from it without losing or repeating a document.
//
// Each request goes through two layers, as the feed's do: the outer one is
// retries.Visit (pyvespa's VISIT, 3 attempts) retrying a 5xx or an error,
// which a visit request may repeat since it changes nothing, with a wait
// where pyvespa's has none, and a retry budget; the inner one is
// retries.SyncRequest for connection errors, with a breaker that waits an
// outage out. A 429 goes back to a gate per endpoint, which learns how
// many visits the server serves at once (a visitor slot is a count) and
// holds the other slices' requests until a place frees. A request that
// fails even so is made again, from where its slice stands, until the
// slice has read nothing for MaxOutage.
//
// A Client asks for JSON lines (stream=true): each document comes as soon
// as the server visits it, and a stream cut short is taken up from the
// last continuation token it carried, the documents it sends again
// dropped (see Progress.Seen). Once the server serves fewer visits at
// once than there are slices, which then take turns, the slices ask for
// JSON pages; so does a Client with Config.Pages, and a server that
// answers a stream with a page is read as one.
package visit

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed32e55400/retries"
	"github.com/seed32e55400/retries/internal/redact"
)

// Config says what a Client visits, and how.
type Config struct {
	URL string // the endpoint, such as http://localhost:8080
	// URLs, if not empty, are several endpoints in place of URL: slice i
	// is visited through URLs[i%len(URLs)] (with a Share, its k-th slice
	// through URLs[k%len(URLs)]), each endpoint with its own
	// gate and breaker.
	URLs    []string
	Cluster string // the content cluster to visit; required
	// Selection, FieldSet and BucketSpace are document/v1's selection,
	// fieldSet and bucketSpace; "" for the server's defaults.
	Selection, FieldSet, BucketSpace string
	// Namespace and DocumentType, both or neither, restrict a visit to
	// the documents of that type in that namespace, through
	// /document/v1/NAMESPACE/TYPE/docid/. A Process has its own.
	Namespace, DocumentType string
	// Slices is how many slices the corpus is split into, visited at once
	// as the server allows (its 429s teach the gate how many); 0: 1. A
	// Progress holds to it.
	Slices int
	// Share, if not zero, is the part of the Slices this Client visits,
	// when the visit is split across processes; its slices go round the
	// URLs in turn. A Progress holds to it too.
	Share Share
	// WantedDocumentCount is a request's documents, best effort (a page
	// holds whole buckets); 0: 1000.
	WantedDocumentCount int
	// Pages asks for JSON pages instead of a stream of JSON lines.
	Pages  bool
	Header http.Header // sent with every request
	TLS    *tls.Config // for https URLs; nil: Go's defaults
	// MaxOutage ends a visit whose slice has read nothing (no document,
	// no token) for this long, waiting for a place at the gate left out,
	// or none of whose slices has read anything for this long (every
	// request answered 429, say), with an error matching ErrMaxOutage; 0:
	// 5 minutes, negative: none.
	MaxOutage time.Duration
	// Budget bounds the outer layer's retries; nil: retries.NewBudget(0.1, 5).
	Budget *retries.Budget
	// Log, if not nil, gets a line when requests begin to fail (the cause,
	// and how long the visit waits for them to succeed again) and one
	// when they succeed again, each after LogPrefix ("": "retries visit: ").
	// The values of Header are redacted from what it quotes of the
	// server's answers, as they are from every error of the Client.
	Log       io.Writer
	LogPrefix string
	// Process, if not nil, makes the server delete or update each
	// document the visit selects, as it visits it (see Process). The
	// visit then goes by pages, whatever Pages says.
	Process *Process
}

// Document is one document visited.
type Document struct {
	ID     string          `json:"id"`
	Fields json.RawMessage `json:"fields"`
}

// Progress is where each slice of a visit stands. The zero Progress is
// the start of a visit.
type Progress struct {
	Slices int      `json:"slices"`
	Tokens []string `json:"tokens"` // per slice: the continuation to go on from; "" at its start
	Done   []bool   `json:"done"`   // per slice: visited to its end
	// Seen holds, per slice, the ids handed out from a stream since the
	// continuation token before its last one: the documents a visit from
	// Tokens may send again. A stream writes a token that covers a
	// finished bucket after the next document, which it does not cover,
	// and a stream cut short says nothing of its last token, so a visit
	// resumed from Tokens drops what it reads of Seen. nil when empty.
	Seen [][]string `json:"seen,omitempty"`
}

// SlicesDone returns how many slices are visited to their end.
func (p Progress) SlicesDone() int {
	n := 0
	for _, d := range p.Done {
		if d {
			n++
		}
	}
	return n
}

// Complete reports whether every slice is visited to its end.
func (p Progress) Complete() bool {
	if p.Slices == 0 {
		return false
	}
	for _, d := range p.Done {
		if !d {
			return false
		}
	}
	return true
}

func (p Progress) clone() Progress {
	q := Progress{Slices: p.Slices, Tokens: append([]string(nil), p.Tokens...), Done: append([]bool(nil), p.Done...)}
	if p.Seen != nil {
		q.Seen = append([][]string(nil), p.Seen...) // each slice's list is replaced, never changed
	}
	return q
}

// Page is what a slice read in one piece (a page, or a stretch of a
// stream): its documents, and the progress of the whole visit once they
// are safe.
type Page struct {
	Slice     int
	Documents []Document
	Progress  Progress
	// Processed is, with Config.Process, how many documents the server
	// deleted or updated for this page (its documentCount).
	Processed int
}

// Client visits a Config's cluster. It is safe for concurrent use, one
// Visit at a time being the common case.
type Client struct {
	cfg       Config
	endpoints []*endpoint
	counts    visitCounts
	secrets   *redact.Redactor // the values of cfg.Header
	health    health
	proc      *processing // cfg.Process, ready; nil for a visit
	// heard is when any slice of the running Visit last read something
	// new, as UnixNano: while every request is refused with a 429, no
	// slice reads anything, and the visit is out once it is MaxOutage old.
	heard atomic.Int64
}

// endpoint is one URL and the layers of the slices visited through it.
type endpoint struct {
	base    string
	breaker *retries.Breaker
	http    *http.Client // gives a 429 back, to the gate
	gate    *gate        // how many of its slices' requests the server serves at once
}

// The layers of a visit.
var (
	// DefaultOuter is retries.Visit, retrying a 500, 502, 503, 504 or 507,
	// or an error (a visit
	// request changes nothing, so repeating it is safe) after U(0, 0.2 s)
	// then U(0, 0.4 s): pyvespa's waits none, which sends a failing
	// server three requests at once.
	DefaultOuter = retries.Visit.Copy(
		retries.WithRetry(retries.RetryAny(retries.RetryIfAnyError(), retries.RetryIfStatus(500, 502, 503, 504, 507))),
		retries.WithWait(retries.WaitRandomExponential(retries.Exponential{Multiplier: 200 * time.Millisecond, Max: 2 * time.Second})))
	// DefaultInner is retries.SyncRequest (429s and connection errors),
	// waiting what a Retry-After asks for (at most 10 s) when there is one.
	// A Client retries with it what it retries but a 429, which goes to
	// the gate that counts the visits the server serves at once.
	DefaultInner = retries.SyncRequest.Copy(retries.WithWait(retries.WaitRetryAfter(retries.SyncRequest.Wait(), 10*time.Second)))
)

// New returns a Client for cfg, or an error if the URL is not an http or
// https URL with a host, or the cluster is missing.
func New(cfg Config) (*Client, error) {
	urls := cfg.URLs
	if len(urls) == 0 {
		urls = []string{cfg.URL}
	}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("URL %q: want http://HOST[:PORT] or https://…", s)
		}
	}
	if cfg.Cluster == "" {
		return nil, errors.New("visit: Cluster is required")
	}
	if (cfg.Namespace == "") != (cfg.DocumentType == "") {
		return nil, errors.New("visit: Namespace and DocumentType go together")
	}
	cfg.Slices = max(cfg.Slices, 1)
	if err := cfg.Share.check(cfg.Slices); err != nil {
		return nil, err
	}
	if cfg.WantedDocumentCount <= 0 {
		cfg.WantedDocumentCount = 1000
	}
	if cfg.MaxOutage == 0 {
		cfg.MaxOutage = 5 * time.Minute
	}
	if cfg.Budget == nil {
		cfg.Budget = retries.NewBudget(0.1, 5)
	}
	c := &Client{cfg: cfg, secrets: redact.New(cfg.Header, urls...)}
	if cfg.Process != nil {
		var err error
		if c.proc, err = cfg.Process.prepare(cfg); err != nil {
			return nil, err
		}
		c.cfg.Pages = true // the handler answers a page, whatever a stream asks
	}
	c.health.log, c.health.prefix = cfg.Log, cmp.Or(cfg.LogPrefix, "retries visit: ")
	// A failed attempt is heard of as it fails, not once the layers give
	// up on it (which a connection refused takes 20 s to do).
	heard := retries.WithBeforeSleep(func(_ context.Context, st retries.State) {
		err := st.Err
		if r, ok := st.Value.(*http.Response); ok && err == nil {
			err = fmt.Errorf("visit: %s", r.Status)
		}
		if err != nil {
			c.health.failed(err, cfg.MaxOutage)
		}
	})
	outer := DefaultOuter.Copy(retries.WithBudget(cfg.Budget), heard)
	mine := cfg.Share.Count(cfg.Slices)
	for i, s := range urls {
		share := (mine - i + len(urls) - 1) / len(urls) // the slices visited through it
		ep := &endpoint{base: strings.TrimRight(s, "/"), breaker: retries.NewBreaker(retries.BreakerConfig{}), gate: newGate(max(share, 1))}
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.TLSClientConfig = cfg.TLS
		base.MaxIdleConnsPerHost = max(share, 1)
		outage := retries.RetryIfOutage(ep.breaker, DefaultOuter.Retry())
		inner := DefaultInner.Copy(heard, retries.WithBreaker(ep.breaker), retries.WithRetry(retries.RetryAny(
			retries.RetryAll(DefaultInner.Retry(), retries.RetryNot(retries.RetryIfStatus(http.StatusTooManyRequests))), outage)))
		ep.http = &http.Client{Transport: retries.NewTransport(retries.NewTransport(wire{base, &c.counts}, inner), outer)}
		c.endpoints = append(c.endpoints, ep)
	}
	return c, nil
}

// ErrMaxOutage is why a visit ended when a slice read nothing for longer
// than Config.MaxOutage; Visit's error matches it.
var ErrMaxOutage = errors.New("visit: a slice has failed for longer than -max-outage")

// StatusError is a page the server refused with a status that asking
// again does not change (a 4xx other than 429), such as a cluster it does
// not have, or a 200 that is no visit page (Status 200: an endpoint that
// is not document/v1's, such as a query container's); Message is its
// message.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("visit: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}
