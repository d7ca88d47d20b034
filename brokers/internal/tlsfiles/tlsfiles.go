// Package tlsfiles builds a client *tls.Config from the PEM files a broker's configuration
// names, with errors that name the configuration key (tls.ca_file, tls.cert_file/tls.key_file).
// brokers/nats and brokers/rabbitmq use it.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Config returns a TLS 1.2+ client configuration that trusts the certificates of caFile (the
// system pool when empty), presents the key pair certFile/keyFile (none when certFile is
// empty), expects serverName (the dialled host when empty) and, with insecure, verifies nothing.
func Config(caFile, certFile, keyFile, serverName string, insecure bool) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: insecure} //nolint:gosec // documented test-only opt-out
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file/tls.key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
