package feed

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// leaseError is a write refused because Config.Fence's Until had passed. fresh
// says that nothing had been written to its connection before (the
// request's first bytes on a new connection over HTTP/1.1, or a TLS
// handshake's): then nothing of any request can have reached the server,
// as when a dial fails.
type leaseError struct{ fresh bool }

func (e *leaseError) Error() string {
	return "feed: the lease ran out before the request was written"
}

// leasedConn is a connection that writes only while its lease lasts.
//
// A refused write is remembered, and a read that fails after it fails
// with the refusal: net/http closes a connection whose write failed, and
// its reading goroutine's error (the connection closed) can reach the
// request before the write's, which alone says that nothing was written.
type leasedConn struct {
	net.Conn
	lease   func() time.Time
	written atomic.Bool                // a write went out
	refused atomic.Pointer[leaseError] // the first write refused
}

func (c *leasedConn) Write(b []byte) (int, error) {
	if !time.Now().Before(c.lease()) {
		c.refused.CompareAndSwap(nil, &leaseError{fresh: !c.written.Load()})
		return 0, c.refused.Load()
	}
	c.written.Store(true)
	return c.Conn.Write(b)
}

func (c *leasedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		if le := c.refused.Load(); le != nil {
			return n, le
		}
	}
	return n, err
}

// leaseDial returns dial with each connection it makes leased by lease.
func leaseDial(dial func(context.Context, string, string) (net.Conn, error), lease func() time.Time) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &leasedConn{Conn: conn, lease: lease}, nil
	}
}

// isFreshLeaseError reports whether err is a write that Config.Fence
// refused before anything was written to its connection.
func isFreshLeaseError(err error) bool {
	var le *leaseError
	return errors.As(err, &le) && le.fresh
}
