package retries

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// IsConnectionError reports whether err is a failure of the connection
// itself, the kind [SyncRequest] retries: a dial that was refused, timed out
// or found no route; a DNS lookup that failed; a connection reset or aborted
// by the peer; a broken pipe; a connection already closed; a response cut
// short ([io.ErrUnexpectedEOF], or [io.EOF] inside the *url.Error or
// *net.OpError of a transport, or from an attempt of a [Transport]).
//
// It reports false for nil, for errors that carry none of these, for TLS
// certificate errors, for a [*StatusError], for a dial that could not start
// (a malformed address: [*net.AddrError], [*net.ParseError],
// [net.UnknownNetworkError]), and for an error that matches
// [context.Canceled]. A deadline counts only when a dial or lookup reports
// it (a *net.OpError of a dial, or a *net.DNSError); a plain
// [context.DeadlineExceeded] is the caller's own deadline and does not
// count. A dial cut short by the caller's own deadline reports the same
// timeout as a dial that timed out on its own, and the error alone cannot
// tell them apart: it counts, but Do never retries once the caller's context
// is done, whatever this function reports.
func IsConnectionError(err error) bool {
	// A flat list of classifications in order of precedence, the
	// exclusions first.
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var (
		certErr  *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		status   *StatusError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &status) {
		return false
	}
	// A dial that could not start (a malformed address, an unknown
	// network) is a mistake in the program, not a failed connection.
	var (
		addrErr    *net.AddrError
		parseErr   *net.ParseError
		unknownNet net.UnknownNetworkError
	)
	if errors.As(err, &addrErr) || errors.As(err, &parseErr) || errors.As(err, &unknownNet) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	isOp := errors.As(err, &opErr)
	if isOp && opErr.Op == "dial" {
		return true
	}
	for _, target := range connErrnos {
		if errors.Is(err, target) {
			return true
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	if errors.Is(err, io.EOF) {
		var (
			urlErr *url.Error
			closed *connClosed
		)
		return isOp || errors.As(err, &urlErr) || errors.As(err, &closed)
	}
	return false
}

// connErrnos are the system errors of a connection that failed on its own.
var connErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN, syscall.ETIMEDOUT,
}
