package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
)

// connFlags are the flags of how visit, delete, update and bench reach
// Vespa beside their URLs: headers, a file of headers, and TLS. (feed and
// copy have their own: feed reloads its certificate, copy has two ends.)
type connFlags struct {
	header                    headerFlag
	headerFile, cert, key, ca string
}

// addConnFlags registers c's flags on fs.
func addConnFlags(fs *flag.FlagSet, c *connFlags) {
	fs.Var(&c.header, "header", "send the header `'Name: value'` with every request (repeatable); never printed")
	fs.StringVar(&c.headerFile, "header-file", "", "read headers from `FILE`, one 'Name: value' a line; never printed")
	fs.StringVar(&c.cert, "cert", "", "the client certificate, a PEM `FILE`, for mutual TLS on https URLs")
	fs.StringVar(&c.key, "key", "", "the client certificate's private key, a PEM `FILE`")
	fs.StringVar(&c.ca, "ca", "", "trust the CA certificates of this PEM `FILE` instead of the system's")
}

// load reads the TLS files and the header file, and returns the headers
// and the TLS configuration to send with.
func (c *connFlags) load() (http.Header, *tls.Config, error) {
	tlsCfg, err := loadTLS(c.cert, c.key, c.ca)
	if err != nil {
		return nil, nil, err
	}
	if c.headerFile != "" {
		if err := readHeaderFile(c.headerFile, &c.header); err != nil {
			return nil, nil, fmt.Errorf("-header-file: %w", err)
		}
	}
	return c.header.h, tlsCfg, nil
}
