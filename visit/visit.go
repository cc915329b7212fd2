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
// retries.SyncRequest (429s and connection errors) with a limiter that
// learns how many slices the server serves at once, and a breaker that
// waits an outage out. A page that fails even so is asked for again, from
// the same token, until MaxOutage.
package visit

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed32e55400/retries"
)

// Config says what a Client visits, and how.
type Config struct {
	URL     string // the endpoint, such as http://localhost:8080
	Cluster string // the content cluster to visit; required
	// Selection, FieldSet and BucketSpace are document/v1's selection,
	// fieldSet and bucketSpace; "" for the server's defaults.
	Selection, FieldSet, BucketSpace string
	// Slices is how many slices the corpus is split into, visited at once
	// as the limiter allows; 0: 1. A Progress holds to it.
	Slices int
	// WantedDocumentCount is a page's size, best effort (a page holds
	// whole buckets); 0: 1000.
	WantedDocumentCount int
	Header              http.Header // sent with every request
	TLS                 *tls.Config // for https URLs; nil: Go's defaults
	// MaxOutage ends a visit whose slice has not got a page for this
	// long, with an error matching ErrMaxOutage; 0: 5 minutes, negative:
	// none.
	MaxOutage time.Duration
	// Budget bounds the outer layer's retries; nil: retries.NewBudget(0.1, 5).
	Budget *retries.Budget
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
	return Progress{Slices: p.Slices, Tokens: append([]string(nil), p.Tokens...), Done: append([]bool(nil), p.Done...)}
}

// Page is one page of a slice: its documents, and the progress of the
// whole visit once they are safe.
type Page struct {
	Slice     int
	Documents []Document
	Progress  Progress
}

// Client visits a Config's cluster. It is safe for concurrent use, one
// Visit at a time being the common case.
type Client struct {
	cfg     Config
	base    string
	http    *http.Client
	Limiter *retries.Limiter // how many slices' requests the server serves at once
	Breaker *retries.Breaker
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
	DefaultInner = retries.SyncRequest.Copy(retries.WithWait(retries.WaitRetryAfter(retries.SyncRequest.Wait(), 10*time.Second)))
)

// New returns a Client for cfg, or an error if the URL is not an http or
// https URL with a host, or the cluster is missing.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("URL %q: want http://HOST[:PORT] or https://…", cfg.URL)
	}
	if cfg.Cluster == "" {
		return nil, errors.New("visit: Cluster is required")
	}
	cfg.Slices = max(cfg.Slices, 1)
	if cfg.WantedDocumentCount <= 0 {
		cfg.WantedDocumentCount = 1000
	}
	if cfg.MaxOutage == 0 {
		cfg.MaxOutage = 5 * time.Minute
	}
	if cfg.Budget == nil {
		cfg.Budget = retries.NewBudget(0.1, 5)
	}
	c := &Client{cfg: cfg, base: strings.TrimRight(cfg.URL, "/")}
	c.Limiter = retries.NewLimiter(retries.LimiterConfig{MaxInFlight: cfg.Slices})
	c.Breaker = retries.NewBreaker(retries.BreakerConfig{})
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = cfg.TLS
	base.MaxIdleConnsPerHost = cfg.Slices
	outerRetry := DefaultOuter.Retry()
	inner := DefaultInner.Copy(retries.WithLimiter(c.Limiter), retries.WithBreaker(c.Breaker),
		retries.WithRetry(retries.RetryAny(DefaultInner.Retry(), retries.RetryIfOutage(c.Breaker, outerRetry))))
	outer := DefaultOuter.Copy(retries.WithBudget(cfg.Budget))
	c.http = &http.Client{Transport: retries.NewTransport(retries.NewTransport(base, inner), outer)}
	return c, nil
}

// ErrMaxOutage is why a visit ended when a slice failed to get a page for
// longer than Config.MaxOutage; Visit's error matches it.
var ErrMaxOutage = errors.New("visit: a slice has failed for longer than -max-outage")

// StatusError is a page the server refused with a status that asking
// again does not change (a 4xx other than 429), such as a cluster it does
// not have; Message is its message.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("visit: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Visit visits the slices from from on, each as a series of requests,
// and calls page with each page, one call at a time, on the goroutine of
// Visit: the progress a Page carries covers its documents and those of
// every page before it. It returns when every slice is done, when page
// returns an error (that error), when a page is refused (*StatusError) or
// a slice fails for longer than MaxOutage, or when ctx ends; with the
// progress covering every page that page accepted.
func (c *Client) Visit(ctx context.Context, from Progress, page func(Page) error) (Progress, error) {
	n := c.cfg.Slices
	switch {
	case from.Slices == 0:
		from = Progress{Slices: n, Tokens: make([]string, n), Done: make([]bool, n)}
	case from.Slices != n || len(from.Tokens) != n || len(from.Done) != n:
		return from, fmt.Errorf("visit: the progress is of %d slices, not %d", from.Slices, n)
	}
	prog := from.clone()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type result struct {
		slice int
		docs  []Document
		token string
		done  bool
		ack   chan bool // true: go on
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for i := range n {
		if prog.Done[i] {
			continue
		}
		token := prog.Tokens[i]
		wg.Go(func() {
			for {
				docs, next, err := c.page(ctx, i, token)
				if err != nil {
					cancel(err)
					return
				}
				r := result{slice: i, docs: docs, token: next, done: next == "", ack: make(chan bool, 1)}
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
				if !<-r.ack || r.done {
					return
				}
				token = next
			}
		})
	}
	go func() { wg.Wait(); close(results) }()
	var err error
	for r := range results {
		if err != nil {
			r.ack <- false
			continue
		}
		prog.Tokens[r.slice], prog.Done[r.slice] = r.token, r.done
		if err = page(Page{Slice: r.slice, Documents: r.docs, Progress: prog.clone()}); err != nil {
			prog.Tokens[r.slice], prog.Done[r.slice] = from.Tokens[r.slice], from.Done[r.slice]
			cancel(err)
			r.ack <- false
			continue
		}
		from.Tokens[r.slice], from.Done[r.slice] = r.token, r.done
		r.ack <- true
	}
	if err != nil {
		return from, err
	}
	if cause := context.Cause(ctx); cause != nil && !prog.Complete() {
		return from, cause
	}
	return from, nil
}

// page gets the page of slice i from token, asking again after a failure,
// for at most MaxOutage in all: each request is bounded by what is left of
// it, since the retry layers hold a request for as long as the breaker is
// open.
func (c *Client) page(ctx context.Context, slice int, token string) ([]Document, string, error) {
	start := time.Now()
	for {
		docs, next, err := c.getWithin(ctx, slice, token, start)
		var se *StatusError
		switch {
		case err == nil:
			return docs, next, nil
		case errors.As(err, &se), ctx.Err() != nil:
			return nil, "", err
		case c.cfg.MaxOutage > 0 && time.Since(start) >= c.cfg.MaxOutage:
			return nil, "", fmt.Errorf("%w (%v, slice %d): %w", ErrMaxOutage, c.cfg.MaxOutage, slice, err)
		}
		t := time.NewTimer(time.Duration(500+rand.IntN(500)) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, "", context.Cause(ctx)
		}
	}
}

// getWithin is get, ended when MaxOutage has passed since start.
func (c *Client) getWithin(ctx context.Context, slice int, token string, start time.Time) ([]Document, string, error) {
	if c.cfg.MaxOutage <= 0 {
		return c.get(ctx, slice, token)
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(c.cfg.MaxOutage))
	defer cancel()
	return c.get(ctx, slice, token)
}

// get makes one request of slice i from token.
func (c *Client) get(ctx context.Context, slice int, token string) ([]Document, string, error) {
	q := url.Values{}
	q.Set("cluster", c.cfg.Cluster)
	q.Set("slices", strconv.Itoa(c.cfg.Slices))
	q.Set("sliceId", strconv.Itoa(slice))
	q.Set("wantedDocumentCount", strconv.Itoa(c.cfg.WantedDocumentCount))
	for k, v := range map[string]string{"selection": c.cfg.Selection, "fieldSet": c.cfg.FieldSet, "bucketSpace": c.cfg.BucketSpace, "continuation": token} {
		if v != "" {
			q.Set(k, v)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/document/v1/?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	for k, vs := range c.cfg.Header {
		req.Header[k] = vs
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	var v struct {
		Message      string     `json:"message"`
		Documents    []Document `json:"documents"`
		Continuation string     `json:"continuation"`
	}
	jerr := json.Unmarshal(body, &v)
	switch {
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests:
		if v.Message == "" {
			v.Message = strings.TrimSpace(string(body))
		}
		return nil, "", &StatusError{Status: resp.StatusCode, Message: v.Message}
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("visit: %s", resp.Status)
	case jerr != nil:
		return nil, "", fmt.Errorf("visit: a page that is not JSON: %v", jerr) // cut short: asked for again
	}
	return v.Documents, v.Continuation, nil
}
