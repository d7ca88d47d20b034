package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/xdg-go/scram"
)

// TLSConfig configures TLS towards the brokers.
type TLSConfig struct {
	// Enabled turns TLS on. It is implied by any of the other fields.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities to trust; empty means the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key for mutual TLS (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify disables server certificate verification. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// On reports whether TLS is in use.
func (t TLSConfig) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty disables SASL.
	Mechanism string `yaml:"mechanism"`
	// Username and Password are the credentials; both are required with a mechanism.
	Username string `yaml:"username"`
	// Password is a secret: never part of errors, String or LogValue.
	Password string `yaml:"password"`
}

// String prints the SASL settings with the password redacted.
func (s SASLConfig) String() string {
	return fmt.Sprintf("{Mechanism:%s Username:%s Password:%s}", s.Mechanism, s.Username, redact(s.Password))
}

// GoString is String, so %#v redacts too.
func (s SASLConfig) GoString() string { return s.String() }

// LogValue implements slog.LogValuer with the password redacted.
func (s SASLConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("mechanism", s.Mechanism),
		slog.String("username", s.Username),
		slog.String("password", redact(s.Password)),
	)
}

// validateSecurity checks the TLS files and the SASL settings.
func (c Config) validateSecurity() error {
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("tls.cert_file %q and tls.key_file %q must be set together", c.TLS.CertFile, c.TLS.KeyFile)
	}
	for _, f := range []struct{ name, path string }{
		{"tls.ca_file", c.TLS.CAFile}, {"tls.cert_file", c.TLS.CertFile}, {"tls.key_file", c.TLS.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %q is not readable: %w", f.name, f.path, err)
		}
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.Username != "" || c.SASL.Password != "" {
			return errors.New("sasl.mechanism: missing while sasl.username or sasl.password is set (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.Username == "" {
			return fmt.Errorf("sasl.username: missing, required by sasl.mechanism %s", c.SASL.Mechanism)
		}
		if c.SASL.Password == "" {
			return fmt.Errorf("sasl.password: missing, required by sasl.mechanism %s", c.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("sasl.mechanism: unknown value %q (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", c.SASL.Mechanism)
	}
	return nil
}

func (t TLSConfig) build() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // explicit opt-in, documented as test-only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file: %q holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// The error of LoadX509KeyPair names files and PEM problems, never key material.
			return nil, fmt.Errorf("tls.cert_file %q / tls.key_file %q: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// scramClient adapts xdg-go/scram (the SCRAM implementation Sarama's own examples use; Sarama
// ships none) to sarama.SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	client, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("scram: cannot prepare the client for user %q: %w", user, err)
	}
	s.conv = client.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *scramClient) Done() bool { return s.conv.Done() }
