package pulsar

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// Defaults applied by setDefaults when a field is left at its zero value.
const (
	DefaultTenant                  = "public"
	DefaultNamespace               = "default"
	DefaultOperationTimeout        = 30 * time.Second
	DefaultConnectionTimeout       = 10 * time.Second
	DefaultKeyMetadata             = "aggregate_id"
	DefaultSendTimeout             = 30 * time.Second
	DefaultBatchingMaxPublishDelay = 10 * time.Millisecond
	DefaultBatchingMaxMessages     = 1000
	DefaultBatchingMaxSize         = 128 * 1024
	DefaultNackRedeliveryDelay     = time.Second
	// DefaultMaxMessageSize is the broker's default maxMessageSize (broker.conf, 5 MiB).
	DefaultMaxMessageSize = 5 * 1024 * 1024
)

// UUIDProperty is the Pulsar message property that carries the Watermill message UUID.
// The subscriber restores it as message.UUID and does not repeat it in the metadata.
const UUIDProperty = "_watermill_message_uuid"

// namePattern is what Pulsar accepts in tenant and namespace names.
var namePattern = regexp.MustCompile(`^[-=:.\w]+$`)

// Config holds the connection settings shared by Publisher and Subscriber.
type Config struct {
	// URL is the Pulsar service URL: pulsar://host:6650, pulsar+ssl://host:6651, or an
	// http(s):// lookup URL. Required.
	URL string

	// AuthToken is a JWT used for token authentication. It is a secret: it never appears in
	// errors or logs. Mutually exclusive with AuthTokenFile.
	AuthToken string
	// AuthTokenFile is the path of a file holding the token; it is re-read when the client
	// reconnects, so rotated tokens are picked up.
	AuthTokenFile string

	// TLSTrustCertsFile is the PEM file of the CA certificates trusted for pulsar+ssl://.
	TLSTrustCertsFile string
	// TLSAllowInsecureConnection accepts any server certificate. For tests only.
	TLSAllowInsecureConnection bool
	// TLSSkipHostnameVerification turns off the check that the broker's certificate names the
	// host the client dials (the URL's, then each broker address a lookup returns); the chain
	// is still verified against TLSTrustCertsFile or the system's CAs. Default false: the host
	// name is checked. UNSAFE: anyone holding any certificate those CAs signed (for a public CA,
	// any domain's) can then pose as the broker and receive the token. Use it only for a broker
	// whose certificate cannot name the address clients use, and prefer fixing the certificate.
	// It is logged (pulsar_level=warn) each time a client is made with it.
	TLSSkipHostnameVerification bool
	// Deprecated: the host name is checked by default; set TLSSkipHostnameVerification to turn
	// the check off. TLSValidateHostname is ignored.
	TLSValidateHostname bool
	// TLSCertFile and TLSKeyFile are the client certificate and key for mutual TLS
	// authentication. Both or neither; not combinable with token authentication.
	TLSCertFile string
	TLSKeyFile  string

	// OperationTimeout bounds producer/consumer creation and lookups. Default 30s.
	OperationTimeout time.Duration
	// ConnectionTimeout bounds establishing a TCP connection. Default 10s.
	ConnectionTimeout time.Duration

	// Tenant and Namespace complete short topic names: "orders" becomes
	// persistent://<Tenant>/<Namespace>/orders. Defaults "public" and "default".
	Tenant    string
	Namespace string
}

func (c *Config) setDefaults() {
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = DefaultOperationTimeout
	}
	if c.ConnectionTimeout == 0 {
		c.ConnectionTimeout = DefaultConnectionTimeout
	}
}

// Validate reports the first invalid field, naming it and its value (except secrets).
func (c Config) Validate() error {
	if c.URL == "" {
		return errors.New("URL is required (for example pulsar://127.0.0.1:6650)")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		// The parse error quotes the URL, which could carry credentials: do not wrap it.
		return errors.New("URL is not a valid URL")
	}
	switch u.Scheme {
	case "pulsar", "pulsar+ssl", "http", "https":
	default:
		return fmt.Errorf("URL %q: scheme %q is not one of pulsar, pulsar+ssl, http, https",
			u.Redacted(), u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", u.Redacted())
	}
	if c.AuthToken != "" && c.AuthTokenFile != "" {
		return errors.New("AuthToken and AuthTokenFile are mutually exclusive (AuthToken not shown)")
	}
	if c.TLSCertFile != "" && (c.AuthToken != "" || c.AuthTokenFile != "") {
		return errors.New("TLSCertFile (TLS authentication) cannot be combined with token authentication")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("TLSCertFile %q and TLSKeyFile %q must be set together", c.TLSCertFile, c.TLSKeyFile)
	}
	for _, f := range []struct{ field, path string }{
		{"AuthTokenFile", c.AuthTokenFile},
		{"TLSTrustCertsFile", c.TLSTrustCertsFile},
		{"TLSCertFile", c.TLSCertFile},
		{"TLSKeyFile", c.TLSKeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s %q: %w", f.field, f.path, err)
		}
	}
	if c.OperationTimeout < 0 {
		return fmt.Errorf("OperationTimeout %s must not be negative", c.OperationTimeout)
	}
	if c.ConnectionTimeout < 0 {
		return fmt.Errorf("ConnectionTimeout %s must not be negative", c.ConnectionTimeout)
	}
	if c.Tenant != "" && !namePattern.MatchString(c.Tenant) {
		return fmt.Errorf("Tenant %q: must match %s", c.Tenant, namePattern)
	}
	if c.Namespace != "" && !namePattern.MatchString(c.Namespace) {
		return fmt.Errorf("Namespace %q: must match %s", c.Namespace, namePattern)
	}
	return nil
}

// clientOptions builds the pulsar-client-go options. The token is handed to the client only.
// The host name is checked unless TLSSkipHostnameVerification is set, which is logged.
func (c Config) clientOptions(logger *clientLogger) apulsar.ClientOptions {
	opts := apulsar.ClientOptions{
		URL:                        c.URL,
		OperationTimeout:           c.OperationTimeout,
		ConnectionTimeout:          c.ConnectionTimeout,
		TLSTrustCertsFilePath:      c.TLSTrustCertsFile,
		TLSAllowInsecureConnection: c.TLSAllowInsecureConnection,
		TLSValidateHostname:        !c.TLSSkipHostnameVerification,
		Logger:                     logger,
	}
	if c.TLSSkipHostnameVerification && c.tls() && !c.TLSAllowInsecureConnection {
		opts.TLSConfig = c.tlsConfigWithoutHostname()
		logger.logger.Info("pulsar: TLS hostname verification is OFF (TLSSkipHostnameVerification): any certificate "+
			"signed by a trusted CA is accepted for any host, and the token goes to whoever presents one",
			watermill.LogFields{"pulsar_level": "warn", "broker": c.describe()})
	}
	switch {
	case c.AuthToken != "":
		opts.Authentication = apulsar.NewAuthenticationToken(c.AuthToken)
	case c.AuthTokenFile != "":
		opts.Authentication = apulsar.NewAuthenticationTokenFromFile(c.AuthTokenFile)
	case c.TLSCertFile != "":
		opts.Authentication = apulsar.NewAuthenticationTLS(c.TLSCertFile, c.TLSKeyFile)
	}
	return opts
}

// tlsConfigWithoutHostname is the TLS configuration of TLSSkipHostnameVerification: Go's own
// verification is off (it always checks the host name), and VerifyConnection checks the chain
// alone. pulsar-client-go uses a given TLSConfig as is, so the client certificate of mutual TLS
// is supplied here too. The files are read at each handshake, so rotated ones are picked up.
func (c Config) tlsConfigWithoutHostname() *tls.Config {
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified in VerifyConnection; only the host name is not, by request.
		InsecureSkipVerify: true, //nolint:gosec // TLSSkipHostnameVerification, documented as unsafe
		VerifyConnection:   c.verifyChain,
	}
	if c.TLSCertFile != "" {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("pulsar: TLSCertFile %q / TLSKeyFile %q: %w", c.TLSCertFile, c.TLSKeyFile, err)
			}
			return &cert, nil
		}
	}
	return tc
}

// verifyChain checks the broker's certificate chain against TLSTrustCertsFile (the system's
// CAs when empty), without a host name.
func (c Config) verifyChain(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("pulsar: the broker presented no certificate")
	}
	opts := x509.VerifyOptions{Intermediates: x509.NewCertPool()}
	if c.TLSTrustCertsFile != "" {
		pem, err := os.ReadFile(c.TLSTrustCertsFile)
		if err != nil {
			return fmt.Errorf("pulsar: TLSTrustCertsFile %q: %w", c.TLSTrustCertsFile, err)
		}
		opts.Roots = x509.NewCertPool()
		if !opts.Roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("pulsar: TLSTrustCertsFile %q holds no PEM certificate", c.TLSTrustCertsFile)
		}
	}
	for _, cert := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(cert)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("pulsar: the broker's certificate: %w", err)
	}
	return nil
}

// FullTopicName expands a topic name the way Publisher and Subscriber do:
// "orders" -> persistent://<Tenant>/<Namespace>/orders, "tenant/ns/orders" ->
// persistent://tenant/ns/orders; persistent:// and non-persistent:// names are kept.
func (c Config) FullTopicName(topic string) (string, error) {
	tenant, namespace := c.Tenant, c.Namespace
	if tenant == "" {
		tenant = DefaultTenant
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if topic == "" {
		return "", errors.New("topic name is empty")
	}
	if strings.ContainsAny(topic, " \t\r\n") {
		return "", fmt.Errorf("topic %q contains white space", topic)
	}
	if scheme, rest, ok := strings.Cut(topic, "://"); ok {
		if scheme != "persistent" && scheme != "non-persistent" {
			return "", fmt.Errorf("topic %q: scheme %q is not persistent or non-persistent", topic, scheme)
		}
		if parts := strings.Split(rest, "/"); len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return "", fmt.Errorf("topic %q: want %s://tenant/namespace/topic", topic, scheme)
		}
		return topic, nil
	}
	switch parts := strings.Split(topic, "/"); len(parts) {
	case 1:
		return "persistent://" + tenant + "/" + namespace + "/" + topic, nil
	case 3:
		if parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return "", fmt.Errorf("topic %q: want tenant/namespace/topic", topic)
		}
		return "persistent://" + topic, nil
	default:
		return "", fmt.Errorf("topic %q: want a short name, tenant/namespace/topic or a persistent:// URL", topic)
	}
}
