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

// Compression names a Pulsar compression codec.
type Compression string

// Compression codecs.
const (
	CompressionNone Compression = "none"
	CompressionLZ4  Compression = "lz4"
	CompressionZLib Compression = "zlib"
	CompressionZSTD Compression = "zstd"
)

func (c Compression) pulsarType() (apulsar.CompressionType, bool) {
	switch c {
	case "", CompressionNone:
		return apulsar.NoCompression, true
	case CompressionLZ4:
		return apulsar.LZ4, true
	case CompressionZLib:
		return apulsar.ZLib, true
	case CompressionZSTD:
		return apulsar.ZSTD, true
	}
	return 0, false
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	Config

	// KeyMetadata is the metadata entry whose value becomes the Pulsar message key and
	// ordering key (what KeyShared subscriptions route on). A message without this entry is
	// sent without a key. Default "aggregate_id".
	KeyMetadata string

	// SendTimeout bounds a Publish or PublishEach call, from its start until the broker's
	// acknowledgement of its last message; past it the messages not yet acknowledged fail
	// and the topic's producer is replaced. Default 30s.
	SendTimeout time.Duration
	// MaxMessageSize is the largest message the broker accepts (its maxMessageSize). A
	// message whose estimated size (payload, properties, key and frame overhead) is above it
	// is refused before anything of its call is sent. Set it when the broker's limit differs
	// from Pulsar's default. Default 5 MiB.
	MaxMessageSize int
	// MaxPendingMessages bounds the producer's queue of unacknowledged messages; Publish
	// waits for room when it is full. 0 keeps pulsar-client-go's default.
	MaxPendingMessages int

	// DisableBatching sends every message in its own frame.
	DisableBatching bool
	// BatchingMaxPublishDelay is how long a batch may wait to fill up. Publish flushes at
	// its end anyway, so this matters only for concurrent Publish calls. Default 10ms.
	BatchingMaxPublishDelay time.Duration
	// BatchingMaxMessages caps messages per batch. Default 1000.
	BatchingMaxMessages uint
	// BatchingMaxSize caps bytes per batch. Default 128 KiB.
	BatchingMaxSize uint
	// MixedKeyBatches uses Pulsar's default batch container, which puts messages of
	// different keys in one batch. By default batches are built per key, which KeyShared
	// subscriptions need to keep per-key order; mixed batches are denser when every
	// consumer uses Shared, Failover or Exclusive.
	MixedKeyBatches bool

	// Compression is the codec: none (default), lz4, zlib or zstd.
	Compression Compression
}

func (c *PublisherConfig) setDefaults() {
	c.Config.setDefaults()
	if c.KeyMetadata == "" {
		c.KeyMetadata = DefaultKeyMetadata
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.BatchingMaxPublishDelay == 0 {
		c.BatchingMaxPublishDelay = DefaultBatchingMaxPublishDelay
	}
	if c.BatchingMaxMessages == 0 {
		c.BatchingMaxMessages = DefaultBatchingMaxMessages
	}
	if c.BatchingMaxSize == 0 {
		c.BatchingMaxSize = DefaultBatchingMaxSize
	}
}

// Validate reports the first invalid field, naming it and its value (except secrets).
func (c PublisherConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.SendTimeout < 0 {
		return fmt.Errorf("SendTimeout %s must not be negative", c.SendTimeout)
	}
	if c.MaxPendingMessages < 0 {
		return fmt.Errorf("MaxPendingMessages %d must not be negative", c.MaxPendingMessages)
	}
	if c.MaxMessageSize < 0 {
		return fmt.Errorf("MaxMessageSize %d must not be negative", c.MaxMessageSize)
	}
	if c.BatchingMaxPublishDelay < 0 {
		return fmt.Errorf("BatchingMaxPublishDelay %s must not be negative", c.BatchingMaxPublishDelay)
	}
	if _, ok := c.Compression.pulsarType(); !ok {
		return fmt.Errorf("Compression %q is not one of none, lz4, zlib, zstd", c.Compression)
	}
	return nil
}

// SubscriptionType is the Pulsar subscription type.
type SubscriptionType string

// Subscription types. See docs/pulsar.md for what each one guarantees.
const (
	// SubscriptionKeyShared spreads keys over the consumers; each key goes to one consumer
	// at a time, so per-key order holds while several consumers share the load. Default.
	SubscriptionKeyShared SubscriptionType = "key_shared"
	// SubscriptionShared spreads messages round-robin: most parallel, no order.
	SubscriptionShared SubscriptionType = "shared"
	// SubscriptionFailover delivers everything to one active consumer, others stand by.
	SubscriptionFailover SubscriptionType = "failover"
	// SubscriptionExclusive allows a single consumer; a second Subscribe fails.
	SubscriptionExclusive SubscriptionType = "exclusive"
)

func (t SubscriptionType) pulsarType() (apulsar.SubscriptionType, bool) {
	switch t {
	case SubscriptionKeyShared:
		return apulsar.KeyShared, true
	case SubscriptionShared:
		return apulsar.Shared, true
	case SubscriptionFailover:
		return apulsar.Failover, true
	case SubscriptionExclusive:
		return apulsar.Exclusive, true
	}
	return 0, false
}

// InitialPosition is where a new subscription starts reading.
type InitialPosition string

// Initial positions.
const (
	// PositionEarliest starts at the oldest retained message. Default, so that nothing
	// published before the subscription's first start is missed.
	PositionEarliest InitialPosition = "earliest"
	// PositionLatest starts after the last published message.
	PositionLatest InitialPosition = "latest"
)

// DeadLetterPolicy moves a message to a dead-letter topic after it was delivered
// MaxDeliveries times without being acked.
type DeadLetterPolicy struct {
	// MaxDeliveries is the number of deliveries before the message is dead-lettered. Required (>= 1).
	MaxDeliveries uint32
	// Topic is the dead-letter topic, short name or full URL. Default (Pulsar's):
	// <topic>-<subscription>-DLQ.
	Topic string
	// InitialSubscription, if set, is created on the dead-letter topic together with its
	// producer, so dead letters are retained until someone reads them.
	InitialSubscription string
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	Config

	// SubscriptionName is the durable subscription (the consumer group). Required:
	// subscribers sharing a name share the messages, different names each get all of them.
	SubscriptionName string
	// SubscriptionType is key_shared (default), shared, failover or exclusive.
	SubscriptionType SubscriptionType
	// InitialPosition is where a new subscription starts: earliest (default) or latest.
	InitialPosition InitialPosition
	// NackRedeliveryDelay is how long a nacked message waits before redelivery. Default 1s.
	NackRedeliveryDelay time.Duration
	// ReceiverQueueSize is how many messages the consumer prefetches. 0 keeps
	// pulsar-client-go's default (1000).
	ReceiverQueueSize int
	// ConsumerName is an optional name shown in the broker's stats.
	ConsumerName string
	// DeadLetter, if set, enables Pulsar's dead-letter policy.
	DeadLetter *DeadLetterPolicy
}

func (c *SubscriberConfig) setDefaults() {
	c.Config.setDefaults()
	if c.SubscriptionType == "" {
		c.SubscriptionType = SubscriptionKeyShared
	}
	if c.InitialPosition == "" {
		c.InitialPosition = PositionEarliest
	}
	if c.NackRedeliveryDelay == 0 {
		c.NackRedeliveryDelay = DefaultNackRedeliveryDelay
	}
}

// Validate reports the first invalid field, naming it and its value (except secrets).
func (c SubscriberConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(c.SubscriptionName) == "" {
		return fmt.Errorf("SubscriptionName %q is required (it names the consumer group)", c.SubscriptionName)
	}
	if _, ok := c.SubscriptionType.pulsarType(); !ok && c.SubscriptionType != "" {
		return fmt.Errorf("SubscriptionType %q is not one of key_shared, shared, failover, exclusive",
			c.SubscriptionType)
	}
	switch c.InitialPosition {
	case "", PositionEarliest, PositionLatest:
	default:
		return fmt.Errorf("InitialPosition %q is not one of earliest, latest", c.InitialPosition)
	}
	if c.NackRedeliveryDelay < 0 {
		return fmt.Errorf("NackRedeliveryDelay %s must not be negative", c.NackRedeliveryDelay)
	}
	if c.ReceiverQueueSize < 0 {
		return fmt.Errorf("ReceiverQueueSize %d must not be negative", c.ReceiverQueueSize)
	}
	if c.DeadLetter != nil {
		if c.DeadLetter.MaxDeliveries < 1 {
			return fmt.Errorf("DeadLetter.MaxDeliveries %d must be at least 1", c.DeadLetter.MaxDeliveries)
		}
		if c.DeadLetter.Topic != "" {
			if _, err := c.Config.FullTopicName(c.DeadLetter.Topic); err != nil {
				return fmt.Errorf("DeadLetter.Topic: %w", err)
			}
		}
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
