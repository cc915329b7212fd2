package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/seed32e55400/retries"
)

// Deployment is what Deploy did: the generation the package became, and
// what the change asks of the operator.
type Deployment struct {
	// Generation is the application's generation this deployment made
	// (its session's id); Previous the one before it, 0 if none.
	Generation, Previous int64
	// Posts are the POSTs of the package sent: 1 unless an answer was
	// lost before the package was committed, or the config server asked
	// for another try.
	Posts int
	// Adopted says an answer was lost after the config server committed
	// the package: its generation was read and taken as this deployment's,
	// with no second POST. The config server's message and the change's
	// actions were lost with the answer.
	Adopted bool
	// Activated says the session had to be activated after the POST (the
	// config server prepared it and answered "activated": false).
	Activated bool
	// Message is the config server's ("Session 3 for tenant 'default'
	// prepared and activated.").
	Message string
	// Restart are the services that apply the change only when restarted;
	// Refeed and Reindex the document types it asks to be fed or
	// reindexed again.
	Restart         []Restart
	Refeed, Reindex []Action
}

// Restart is a service that needs a restart to apply a deployment.
type Restart struct {
	Cluster, Type, Host string // its cluster, its service type ("container"), its host
	Messages            []string
}

// Action is a refeed or a reindex a deployment asks for.
type Action struct {
	Name, DocumentType, Cluster string
	Messages                    []string
}

// Generation returns the application's active generation, 0 when it has
// never been deployed (the config server answers 404).
func (c *Client) Generation(ctx context.Context) (int64, error) {
	return retries.DoValue(ctx, c.policy, func(ctx context.Context) (int64, error) {
		g, err := c.generation(ctx)
		return g, c.again(err)
	})
}

// generation is one attempt of Generation.
func (c *Client) generation(ctx context.Context) (int64, error) {
	var a struct {
		Generation int64 `json:"generation"`
	}
	err := c.call(ctx, http.MethodGet, "/application/v2/tenant/"+url.PathEscape(c.cfg.Tenant)+"/application/"+url.PathEscape(c.cfg.Application), nil, "", &a)
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
		return 0, nil
	}
	return a.Generation, err
}

// Deploy deploys the application package pkg, a zip archive with
// services.xml at its root (see Zip), and returns what it did; it does not
// wait for the services (see Wait). The package is posted once: after an
// answer lost on the way, Deploy reads the application's generation, and
// one above the generation before the POST is the deployment's, adopted;
// only when it did not move is the package posted again. A session the
// config server prepared but did not activate is activated. A failure
// Retryable says may pass is tried again under Config.Policy, within
// ctx's deadline; the error of a failure that may not is an *Error. The
// Deployment is never nil: with an error, it says how many POSTs went out.
func (c *Client) Deploy(ctx context.Context, pkg []byte) (*Deployment, error) {
	prev, err := c.Generation(ctx)
	d := &Deployment{Previous: prev}
	if err != nil {
		return d, fmt.Errorf("control: reading the generation before deploying: %w", err)
	}
	err = c.policy.Do(ctx, func(ctx context.Context) error {
		d.Posts++
		a, err := c.post(ctx, pkg)
		if err == nil {
			d.Generation, d.Message = a.session, a.Message
			d.Restart, d.Refeed, d.Reindex = a.Actions.restarts(), a.Actions.Refeed, a.Actions.Reindex
			if !a.Activated {
				d.Activated = true
				return retries.Permanent(c.activate(ctx, a.session))
			}
			return nil
		}
		if !Retryable(err) || unsent(err) {
			return c.again(err)
		}
		if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusConflict {
			return c.again(err) // a conflict that passes: nothing was activated
		}
		// The answer was lost, or was a failure that may have come after
		// the commit: did the package land?
		g, gerr := c.Generation(ctx)
		if gerr != nil {
			return retries.Permanent(fmt.Errorf("%w; and then reading the generation: %w", err, gerr))
		}
		if g > prev {
			d.Generation, d.Adopted = g, true
			return nil
		}
		return c.again(err)
	})
	return d, err
}

// answer is the part of prepareandactivate's answer Deploy reads.
type answer struct {
	SessionID string  `json:"session-id"`
	Message   string  `json:"message"`
	Activated bool    `json:"activated"`
	Actions   actions `json:"configChangeActions"`
	session   int64
}

// actions is configChangeActions.
type actions struct {
	Restart []struct {
		Cluster  string   `json:"clusterName"`
		Messages []string `json:"messages"`
		Services []struct {
			Type string `json:"serviceType"`
			Host string `json:"hostName"`
		} `json:"services"`
	} `json:"restart"`
	Refeed  []Action `json:"refeed"`
	Reindex []Action `json:"reindex"`
}

// UnmarshalJSON reads an Action as the config server writes one.
func (a *Action) UnmarshalJSON(b []byte) error {
	var v struct {
		Name         string   `json:"name"`
		DocumentType string   `json:"documentType"`
		Cluster      string   `json:"clusterName"`
		Messages     []string `json:"messages"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Action{Name: v.Name, DocumentType: v.DocumentType, Cluster: v.Cluster, Messages: v.Messages}
	return nil
}

// restarts returns one Restart a service of the restart actions.
func (a actions) restarts() []Restart {
	var r []Restart
	for _, x := range a.Restart {
		for _, s := range x.Services {
			r = append(r, Restart{Cluster: x.Cluster, Type: s.Type, Host: s.Host, Messages: x.Messages})
		}
	}
	return r
}

// post sends the package once, with no retry.
func (c *Client) post(ctx context.Context, pkg []byte) (*answer, error) {
	var a answer
	path := "/application/v2/tenant/" + url.PathEscape(c.cfg.Tenant) + "/prepareandactivate?applicationName=" + url.QueryEscape(c.cfg.Application) + "&instance=" + url.QueryEscape(c.cfg.Instance)
	if err := c.call(ctx, http.MethodPost, path, pkg, "application/zip", &a); err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(a.SessionID, 10, 64)
	if err != nil || n <= 0 { // a session id is a generation: from 1
		return nil, retries.Permanent(fmt.Errorf("control: the deploy's answer has no session id (%q)", a.SessionID))
	}
	a.session = n
	return &a, nil
}

// activate activates the prepared session n. Between tries it reads the
// generation: at n, an answer lost on the way activated it; past n,
// another deployment came first and the session is superseded, which no
// retry mends.
func (c *Client) activate(ctx context.Context, n int64) error {
	path := "/application/v2/tenant/" + url.PathEscape(c.cfg.Tenant) + "/session/" + strconv.FormatInt(n, 10) + "/active"
	return c.policy.Do(ctx, func(ctx context.Context) error {
		err := c.call(ctx, http.MethodPut, path, nil, "", nil)
		if err == nil || !Retryable(err) {
			return err
		}
		g, gerr := c.generation(ctx)
		switch {
		case gerr != nil:
			return c.again(err)
		case g == n:
			return nil
		case g > n:
			return retries.Permanent(fmt.Errorf("control: session %d was prepared, but generation %d became active first: deploy again (%w)", n, g, err))
		}
		return c.again(err)
	})
}

// call sends one request to the config server and reads a 2xx's JSON
// into out (if not nil); another status is an *Error.
func (c *Client) call(ctx context.Context, method, path string, body []byte, ctype string, out any) error {
	return c.callURL(ctx, method, c.base.String()+path, body, ctype, out)
}

// callURL is call to a URL of any host (a container's).
func (c *Client) callURL(ctx context.Context, method, u string, body []byte, ctype string, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return retries.Permanent(err)
	}
	for k, v := range c.cfg.Header {
		req.Header[k] = v
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("control: %s %s: the answer is not what the deploy API writes: %w", method, req.URL.Redacted(), err)
	}
	return nil
}
