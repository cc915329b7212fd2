// Package control deploys a Vespa application package to a self-hosted
// config server and waits until the generation it made serves: the call
// site of [retries.ControlPlane].
//
// [Client.Deploy] sends the package once. It reads the application's
// generation before posting; after an answer lost on the way (a reset, an
// EOF, a timeout, a 502 or 504, any 5xx) it reads the generation again and
// adopts one that landed rather than posting a second time, and it
// finishes a session the config server prepared but did not activate
// ("activated": false). It retries what the config server asks to be
// retried (its 409 codes, 408, 5xx, a connection that failed) within the
// caller's deadline, and never an invalid package (400), refused
// credentials (401, 403) or a missing application (404).
//
// [Client.Wait] waits until every service runs the generation (converged)
// and every container answers up on /state/v1/health (healthy), through
// the config server's proxy when a container's host cannot be reached. It
// returns at once when a service failed to apply the configuration, and
// says which services wait for a restart. Its polls start short, back off
// while nothing moves and start short again when something does.
package control

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seed32e55400/retries"
)

// DefaultURL is the config server Config.URL names when empty.
const DefaultURL = "http://localhost:19071"

// Config is how a Client reaches a config server, and which application
// it deploys and waits for.
type Config struct {
	// URL is the config server's, DefaultURL when empty.
	URL string
	// Tenant, Application and Instance name the application; each is
	// "default" when empty.
	Tenant, Application, Instance string
	// Header is sent with every request (credentials, say).
	Header http.Header
	// Transport sends the requests; nil means a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Policy retries each call that Retryable says may be sent again;
	// the zero Policy means the package's Policy.
	Policy retries.Policy
	// OnState, if set, is called by Wait with each state of the services
	// that differs from the one before, on Wait's goroutine.
	OnState func(*State)
	// OnFailure, if set, is called with each failure that will be tried
	// again (a request of Deploy or Generation retried, a poll of Wait that
	// failed), on the calling goroutine: a config server that does not
	// answer is said while it is waited for.
	OnFailure func(error)
}

// Policy is the calls' Policy when Config.Policy is zero:
// retries.ControlPlane's waits (1 s, 2 s, then 3 s), retrying what
// Retryable says for as long as the caller's deadline allows (a wait that
// would pass it is not begun), where ControlPlane stops after 3 attempts
// and retries every error.
var Policy = retries.ControlPlane.Copy(
	retries.WithName("control"),
	retries.WithStop(retries.StopNever()),
	retries.WithRetry(retries.RetryIfError(Retryable)),
)

// Client is a client of one config server's deploy API for one
// application. It is safe for concurrent use.
type Client struct {
	cfg    Config
	base   *url.URL
	http   *http.Client
	policy retries.Policy
}

// New returns a Client for cfg, or an error for a URL it cannot use.
func New(cfg Config) (*Client, error) {
	cfg.URL = cmp.Or(cfg.URL, DefaultURL)
	cfg.Tenant = cmp.Or(cfg.Tenant, "default")
	cfg.Application = cmp.Or(cfg.Application, "default")
	cfg.Instance = cmp.Or(cfg.Instance, "default")
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("control: the config server's URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("control: the config server's URL %q: want http://HOST:PORT or https://HOST:PORT", u.Redacted())
	}
	if strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("control: the config server's URL %q has a path: give its root, as %s://%s", u.Redacted(), u.Scheme, u.Host)
	}
	u.Path, u.RawQuery, u.Fragment = "", "", ""
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	p := cfg.Policy
	if p.String() == zeroPolicy {
		p = Policy
	}
	return &Client{cfg: cfg, base: u, http: &http.Client{Transport: tr, CheckRedirect: noRedirect}, policy: p}, nil
}

// noRedirect reports a redirect as the answer it is: the deploy API
// never redirects, and a POST must not be sent on elsewhere.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Close closes the idle connections of the Client's transport.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// instance is the path of the application's instance, under which its
// convergence and its services' proxy are.
func (c *Client) instance() string {
	return "/application/v2/tenant/" + url.PathEscape(c.cfg.Tenant) + "/application/" + url.PathEscape(c.cfg.Application) +
		"/environment/prod/region/default/instance/" + url.PathEscape(c.cfg.Instance)
}

// URL returns the config server's URL, its password redacted.
func (c *Client) URL() string { return c.base.Redacted() }

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// again returns err, having told Config.OnFailure of it when it will be
// tried again.
func (c *Client) again(err error) error {
	if c.cfg.OnFailure != nil && Retryable(err) {
		c.cfg.OnFailure(err)
	}
	return err
}

// zeroPolicy is the zero Policy's String, to tell a Config.Policy left
// zero.
var zeroPolicy = retries.Policy{}.String()
