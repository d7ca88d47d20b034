package brokerconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// PulsarConfig is the pulsar section. Its keys map one to one to brokers/pulsar's Config,
// PublisherConfig and SubscriberConfig, whose documentation gives the defaults; zero values
// keep those defaults.
type PulsarConfig struct {
	// URL is the service URL, pulsar://host:6650 or pulsar+ssl://host:6651. Required.
	URL string `yaml:"url"`
	// AuthToken is a JWT for token authentication: a secret, never printed.
	AuthToken string `yaml:"auth_token"`
	// AuthTokenFile is a file holding the token, re-read on reconnect.
	AuthTokenFile string `yaml:"auth_token_file"`

	TLSTrustCertsFile          string `yaml:"tls_trust_certs_file"`
	TLSAllowInsecureConnection bool   `yaml:"tls_allow_insecure_connection"`
	// TLSSkipHostnameVerification turns off the check that the broker's certificate names the
	// host dialled. Default false. UNSAFE: whoever holds any certificate a trusted CA signed can
	// pose as the broker and receive the token; logged when used.
	TLSSkipHostnameVerification bool `yaml:"tls_skip_hostname_verification"`
	// TLSValidateHostname is deprecated and ignored: the host name is checked by default.
	TLSValidateHostname bool   `yaml:"tls_validate_hostname"`
	TLSCertFile         string `yaml:"tls_cert_file"`
	TLSKeyFile          string `yaml:"tls_key_file"`

	OperationTimeout  time.Duration `yaml:"operation_timeout"`
	ConnectionTimeout time.Duration `yaml:"connection_timeout"`
	Tenant            string        `yaml:"tenant"`
	Namespace         string        `yaml:"namespace"`

	// Publisher settings.
	KeyMetadata             string        `yaml:"key_metadata"`
	SendTimeout             time.Duration `yaml:"send_timeout"`
	MaxPendingMessages      int           `yaml:"max_pending_messages"`
	DisableBatching         bool          `yaml:"disable_batching"`
	BatchingMaxPublishDelay time.Duration `yaml:"batching_max_publish_delay"`
	BatchingMaxMessages     uint          `yaml:"batching_max_messages"`
	BatchingMaxSize         uint          `yaml:"batching_max_size"`
	MixedKeyBatches         bool          `yaml:"mixed_key_batches"`
	Compression             string        `yaml:"compression"`

	// Subscriber settings.
	SubscriptionName    string            `yaml:"subscription_name"`
	SubscriptionType    string            `yaml:"subscription_type"`
	InitialPosition     string            `yaml:"initial_position"`
	NackRedeliveryDelay time.Duration     `yaml:"nack_redelivery_delay"`
	ReceiverQueueSize   int               `yaml:"receiver_queue_size"`
	ConsumerName        string            `yaml:"consumer_name"`
	DeadLetter          *PulsarDeadLetter `yaml:"dead_letter"`
}

// PulsarDeadLetter is the pulsar.dead_letter section (Pulsar's own dead-letter policy).
type PulsarDeadLetter struct {
	MaxDeliveries uint32 `yaml:"max_deliveries"`
	Topic         string `yaml:"topic"`
}

func (p *PulsarConfig) setDefaults() {}

// validate checks what this package can check without the adapter; the adapter's own
// Validate runs in Build and on Config.Validate once the adapter is linked in.
func (p PulsarConfig) validate() error {
	if p.URL == "" {
		return errors.New("url: missing, e.g. pulsar://127.0.0.1:6650")
	}
	if p.AuthToken != "" && p.AuthTokenFile != "" {
		return fmt.Errorf("auth_token: set together with auth_token_file %q; use one", p.AuthTokenFile)
	}
	return validatePulsarAdapter(p)
}

// LogValue implements slog.LogValuer with the token redacted.
func (p PulsarConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", p.URL),
		slog.String("auth_token", redact(p.AuthToken)),
		slog.String("auth_token_file", p.AuthTokenFile),
		slog.String("tls_trust_certs_file", p.TLSTrustCertsFile),
		slog.Bool("tls_allow_insecure_connection", p.TLSAllowInsecureConnection),
		slog.Bool("tls_skip_hostname_verification", p.TLSSkipHostnameVerification),
		slog.String("tls_cert_file", p.TLSCertFile),
		slog.String("tenant", p.Tenant),
		slog.String("namespace", p.Namespace),
		slog.String("key_metadata", p.KeyMetadata),
		slog.String("compression", p.Compression),
		slog.String("subscription_name", p.SubscriptionName),
		slog.String("subscription_type", p.SubscriptionType),
		slog.String("initial_position", p.InitialPosition),
	)
}

// String prints the section with the token redacted.
func (p PulsarConfig) String() string { return p.LogValue().String() }

// GoString is String, so %#v redacts too.
func (p PulsarConfig) GoString() string { return p.String() }

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return "[REDACTED]"
}
