package retries

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	if err == nil || inTree(err, context.Canceled) {
		return false
	}
	if isIn[*tls.CertificateVerificationError](err) || isIn[x509.UnknownAuthorityError](err) ||
		isIn[x509.HostnameError](err) || isIn[x509.CertificateInvalidError](err) || isIn[*StatusError](err) {
		return false
	}
	// A dial that could not start (a malformed address, an unknown
	// network) is a mistake in the program, not a failed connection.
	if isIn[*net.AddrError](err) || isIn[*net.ParseError](err) || isIn[net.UnknownNetworkError](err) {
		return false
	}
	if isIn[*net.DNSError](err) {
		return true
	}
	opErr, isOp := asInTree[*net.OpError](err)
	if isOp && opErr.Op == "dial" {
		return true
	}
	for _, target := range connErrnos {
		if inTree(err, target) {
			return true
		}
	}
	if inTree(err, io.ErrUnexpectedEOF) || inTree(err, net.ErrClosed) {
		return true
	}
	if inTree(err, io.EOF) {
		return isOp || isIn[*url.Error](err) || isIn[*connClosed](err)
	}
	return false
}

// connErrnos are the system errors of a connection that failed on its own.
var connErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN, syscall.ETIMEDOUT,
}
