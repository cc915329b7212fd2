package feed

import (
	"io"
	"net/http"
	"sync/atomic"
)

// DefaultConnections is the number of connection pools when
// Config.Connections is 0, as many as `vespa feed` opens connections: over
// HTTP/2, 8 connections per endpoint.
const DefaultConnections = 8

// connPool spreads requests over transports that each keep connections
// of their own. HTTP/2 multiplexes a transport's requests to one host on
// one connection, so n transports give n connections per endpoint, which
// an L4 load balancer in front of several containers spreads; over
// HTTP/1.1 each transport opens what its requests need, up to its cap.
type connPool struct {
	ts   []*http.Transport
	load []atomic.Int64 // each transport's requests, from RoundTrip until their body is closed
	next atomic.Uint32
}

// newConnPool returns the feed's transports for cfg, with idle
// connections kept for slots requests: cfg.Connections transports of one
// connection per host each, or DefaultConnections without a cap when it is
// 0.
func newConnPool(cfg Config, slots int) *connPool {
	n, perHost := cfg.Connections, 1
	if n == 0 {
		n, perHost = DefaultConnections, 0
	}
	p := &connPool{ts: make([]*http.Transport, n), load: make([]atomic.Int64, n)}
	for i := range p.ts {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxConnsPerHost = perHost
		tr.MaxIdleConnsPerHost = max(perHost, slots/n+1)
		tr.MaxIdleConns = tr.MaxIdleConnsPerHost
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		if cfg.Fence != nil {
			tr.DialContext = leaseDial(tr.DialContext, cfg.Fence.Until)
		}
		if cfg.HTTP2 {
			// Prior knowledge on http URLs, as Vespa's feed client
			// does; ALPN on https.
			var pr http.Protocols
			pr.SetHTTP2(true)
			pr.SetUnencryptedHTTP2(true)
			tr.Protocols = &pr
		}
		p.ts[i] = tr
	}
	return p
}

// pickFrom bounds the transports looked at for each request.
const pickFrom = 8

// pick returns the least loaded of up to pickFrom transports, taken in
// turn: with one connection per transport over HTTP/1.1, a request goes
// to an idle connection when there is one.
func (p *connPool) pick() int {
	n := len(p.ts)
	start := int(p.next.Add(1) % uint32(n))
	best := start
	for k := 1; k < min(n, pickFrom); k++ {
		i := (start + k) % n
		if p.load[i].Load() < p.load[best].Load() {
			best = i
		}
	}
	return best
}

func (p *connPool) RoundTrip(req *http.Request) (*http.Response, error) {
	i := p.pick()
	p.load[i].Add(1)
	resp, err := p.ts[i].RoundTrip(req)
	if err != nil {
		p.load[i].Add(-1)
		return nil, err
	}
	resp.Body = &loadBody{ReadCloser: resp.Body, load: &p.load[i]}
	return resp, nil
}

// CloseIdleConnections closes every transport's idle connections.
func (p *connPool) CloseIdleConnections() {
	for _, t := range p.ts {
		t.CloseIdleConnections()
	}
}

// loadBody takes its request off its transport's load once it is closed.
type loadBody struct {
	io.ReadCloser
	load *atomic.Int64
	done atomic.Bool
}

func (b *loadBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.load.Add(-1)
	}
	return err
}
