package schema

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// RegistryTLS configures TLS towards the registry (YAML schema_registry.tls). An https URL uses
// TLS with the system's certificate authorities without it.
type RegistryTLS struct {
	// CAFile is a PEM file of the certificate authorities to trust; empty means the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key for mutual TLS (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify disables the registry's certificate verification. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// set reports whether any field is set.
func (t RegistryTLS) set() bool { return t.firstSet() != "" }

// firstSet is the YAML key of the first field set, "" when none is.
func (t RegistryTLS) firstSet() string {
	switch {
	case t.CAFile != "":
		return "tls.ca_file"
	case t.CertFile != "":
		return "tls.cert_file"
	case t.KeyFile != "":
		return "tls.key_file"
	case t.InsecureSkipVerify:
		return "tls.insecure_skip_verify"
	}
	return ""
}

// validate names the first bad field by its YAML key (under tls.) and its value.
func (t RegistryTLS) validate() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("tls.cert_file %q and tls.key_file %q must be set together", t.CertFile, t.KeyFile)
	}
	for _, f := range []struct{ key, path string }{{"tls.ca_file", t.CAFile}, {"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %q is not readable: %w", f.key, f.path, err)
		}
	}
	return nil
}

// config builds the tls.Config of the section.
func (t RegistryTLS) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %q holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file and tls.key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
