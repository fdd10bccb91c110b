package httpd

import (
	"crypto/tls"
	"fmt"

	"github.com/rs/zerolog"
)

// NewCertificate loads the --tls-cert/--tls-key pair and re-reads it when
// either file changes (Run): a renewed certificate is served to new
// connections without a restart; a bad pair keeps the old one.
func NewCertificate(certFile, keyFile string, log zerolog.Logger) (*Reloaded[tls.Certificate], error) {
	load := func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		return &c, nil
	}
	return NewReloaded("TLS certificate", []string{certFile, keyFile}, load, log)
}

// TLSConfig serves the certificate current at each handshake.
func TLSConfig(cert *Reloaded[tls.Certificate]) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return cert.Get(), nil
		},
	}
}
