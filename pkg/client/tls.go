package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// TLSFiles name the PEM files of a client's TLS: the CAs it trusts to sign
// mcpd's certificate and its own certificate and key for mTLS. Empty
// names are left out: the system's roots, no client certificate.
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// Empty reports whether no file is named.
func (f TLSFiles) Empty() bool { return f.CAFile == "" && f.CertFile == "" && f.KeyFile == "" }

// Config returns the TLS configuration of the files: TLS 1.2 or later,
// CAFile's certificates as the only trusted roots when it is set, and the
// client certificate when CertFile and KeyFile (both or neither) are.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		b, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("client certificate: give both the certificate file and the key file")
	}
	return cfg, nil
}

// NewTLSTransport returns the client's own transport (many idle
// connections to the one host) speaking TLS as the files say.
func NewTLSTransport(files TLSFiles) (*http.Transport, error) {
	cfg, err := files.Config()
	if err != nil {
		return nil, err
	}
	tr := newTransport()
	tr.TLSClientConfig = cfg
	return tr, nil
}

// WithTransport makes the client send its requests through rt, with the
// default timeout (see NewTLSTransport).
func WithTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.hc = &http.Client{Transport: rt, Timeout: DefaultTimeout} }
}

// UntrustedCertificate reports whether err is mcpd's certificate not being
// trusted: signed by a CA the client does not know (see TLSFiles.CAFile).
func UntrustedCertificate(err error) bool {
	var ua x509.UnknownAuthorityError
	return errors.As(err, &ua)
}
