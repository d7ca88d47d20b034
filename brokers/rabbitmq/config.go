package rabbitmq

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/internal/tlsfiles"
)

// Defaults of Config.
const (
	DefaultConnectionName = "outboxkit"
	DefaultConnectTimeout = 5 * time.Second
	DefaultHeartbeat      = 10 * time.Second
	DefaultQueueType      = QueueTypeClassic
	DefaultKeyMetadata    = "aggregate_id"
	DefaultPublishTimeout = 30 * time.Second
	// DefaultMaxMessageSize is RabbitMQ 4's default max_message_size (16 MiB).
	DefaultMaxMessageSize = 16 << 20
	DefaultChannelPool    = 4
	DefaultCloseTimeout   = 30 * time.Second
	// MaxPartitions bounds Config.Partitions.
	MaxPartitions = 1024
)

// Queue types of Config.QueueType. Only QueueTypeClassic is accepted; QueueTypeQuorum is named
// so that Validate can refuse it with the reason (see Config.QueueType).
const (
	QueueTypeQuorum  = "quorum"
	QueueTypeClassic = "classic"
)

// Config configures the connection, the exchanges and queues this package declares, the
// Publisher and the Subscriber. Zero values take the defaults (SetDefaults); Validate names the
// YAML key of a bad field. Password (and a password in URL) is a secret: String and LogValue
// redact it, errors never contain it.
type Config struct {
	// URL is the server, amqp://host:5672/vhost or amqps://host:5671/vhost (TLS). It may hold
	// user:password, which Username and Password override. Required.
	URL string `yaml:"url"`
	// Username and Password authenticate (SASL PLAIN). Password is a secret.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS configures TLS to the server; it needs an amqps:// URL.
	TLS TLSConfig `yaml:"tls"`
	// ConnectionName is the name the server shows for the connection. Default "outboxkit".
	ConnectionName string `yaml:"connection_name"`
	// ConnectTimeout bounds the TCP, TLS and AMQP handshakes. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// Heartbeat is the AMQP heartbeat interval; a dead connection is noticed within about two.
	// Default 10s.
	Heartbeat time.Duration `yaml:"heartbeat"`

	// Partitions is the number of key-hash queues of a topic. 0 (the default): one queue per
	// topic (and consumer group), whose order is every key's order. N > 0: queue <topic>.<p>,
	// p = fnv1a32(key) mod N, so that N consumers can each read one queue in order. At most 1024.
	Partitions int `yaml:"partitions"`
	// QueueType is the type of the queues this package declares: classic, the default and the
	// only value accepted. quorum is refused by Validate: on a quorum queue with
	// single-active-consumer, RabbitMQ (3.10, the server this package is tested with) delivers
	// a nacked message again only after the messages behind it, so a subscriber's Nack would
	// break per-key order (Watermill's TestResendOnError failed with them).
	QueueType string `yaml:"queue_type"`
	// DisableTopology stops the publisher and the subscriber from declaring exchanges, queues
	// and bindings: they are then an operator's job. A message no queue is bound for is
	// refused (permanently, ErrUnroutable); a missing exchange fails the publish retriably.
	DisableTopology bool `yaml:"disable_topology"`

	// KeyMetadata is the metadata entry holding a message's partition key (the aggregate id).
	// Default "aggregate_id".
	KeyMetadata string `yaml:"key_metadata"`
	// PublishTimeout bounds the wait for one publisher confirmation; a message not confirmed in
	// time fails retriably (it may still be stored: the resend is then a duplicate). Default 30s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// MaxMessageSize is the largest payload the publisher sends; a larger one is refused
	// before sending (permanently, ErrMessageTooLarge). Keep it at most the server's
	// max_message_size: the server refuses a larger message by closing the channel, which fails
	// every message in flight on it. Default 16 MiB.
	MaxMessageSize int `yaml:"max_message_size"`
	// ChannelPool is the number of confirm-mode channels kept open for publishing; each
	// PublishEach call uses one. Default 4.
	ChannelPool int `yaml:"channel_pool"`

	// ConsumerGroup names the queues of a consumer group: empty, the topic's own queues
	// (<topic>, <topic>.<p>); otherwise <queue>:<group>, bound to the same routing keys, which
	// get the messages published after the group first subscribed (or after the publisher,
	// configured with the same group, first published). The publisher declares the queues of
	// its ConsumerGroup.
	ConsumerGroup string `yaml:"consumer_group"`
	// CloseTimeout bounds how long the Subscriber's Close waits for handlers. Default 30s.
	CloseTimeout time.Duration `yaml:"close_timeout"`
}

// TLSConfig configures TLS to the server.
type TLSConfig struct {
	// CAFile is a PEM file of the certificate authorities to trust; empty means the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key for mutual TLS (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server certificate (default: the URL's host).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables the server certificate check. For tests only: whoever sits
	// between the relay and the server then receives the credentials.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// On reports whether a TLS field is set.
func (t TLSConfig) On() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.ConnectionName == "" {
		c.ConnectionName = DefaultConnectionName
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	c.QueueType = strings.ToLower(strings.TrimSpace(c.QueueType))
	if c.QueueType == "" {
		c.QueueType = DefaultQueueType
	}
	if c.KeyMetadata == "" {
		c.KeyMetadata = DefaultKeyMetadata
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.ChannelPool == 0 {
		c.ChannelPool = DefaultChannelPool
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
}

// Validate checks the configuration (with defaults applied to a copy) and returns the first
// problem, starting with the field's YAML key. Secrets never appear in it.
func (c Config) Validate() error {
	c.SetDefaults()
	if err := c.validateURL(); err != nil {
		return err
	}
	if (c.Username == "") != (c.Password == "") {
		return errors.New("username/password: set both or neither")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls.cert_file/tls.key_file: set both or neither")
	}
	if c.Partitions < 0 || c.Partitions > MaxPartitions {
		return fmt.Errorf("partitions: %d out of range 0..%d", c.Partitions, MaxPartitions)
	}
	if err := validateQueueType(c.QueueType); err != nil {
		return err
	}
	for key, d := range map[string]time.Duration{"connect_timeout": c.ConnectTimeout, "heartbeat": c.Heartbeat,
		"publish_timeout": c.PublishTimeout, "close_timeout": c.CloseTimeout} {
		if d < 0 {
			return fmt.Errorf("%s: %s must not be negative", key, d)
		}
	}
	if c.MaxMessageSize < 1 {
		return fmt.Errorf("max_message_size: %d must be at least 1", c.MaxMessageSize)
	}
	if c.ChannelPool < 1 {
		return fmt.Errorf("channel_pool: %d must be at least 1", c.ChannelPool)
	}
	if strings.ContainsAny(c.ConsumerGroup, ":\r\n") {
		return fmt.Errorf("consumer_group: %q must not hold ':' or a line break", c.ConsumerGroup)
	}
	return nil
}

// validateQueueType accepts classic only, and says why quorum is refused.
func validateQueueType(queueType string) error {
	switch queueType {
	case QueueTypeClassic:
		return nil
	case QueueTypeQuorum:
		return fmt.Errorf("queue_type: %q is refused: on a quorum queue with single-active-consumer, RabbitMQ (3.10, the tested server) "+
			"delivers a nacked message again only after the messages behind it, which breaks per-key order; use %s", queueType, QueueTypeClassic)
	}
	return fmt.Errorf("queue_type: unknown value %q (allowed: %s)", queueType, QueueTypeClassic)
}

// validateURL checks URL; its password is never echoed.
func (c Config) validateURL() error {
	if strings.TrimSpace(c.URL) == "" {
		return errors.New("url: missing, e.g. amqp://127.0.0.1:5672/")
	}
	u, err := amqp.ParseURI(strings.TrimSpace(c.URL))
	if err != nil {
		return fmt.Errorf("url: %q is not an AMQP URL such as amqp://127.0.0.1:5672/ (%s)", redactURL(c.URL), redactText(err.Error(), c.URL))
	}
	if c.TLS.On() && u.Scheme != "amqps" {
		return fmt.Errorf("url: %q: tls.* is set, which needs an amqps:// URL", redactURL(c.URL))
	}
	return nil
}

// redactURL hides the password of a URL's userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "[REDACTED]@" + raw[i+1:]
		}
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		}
	}
	return u.String()
}

// redactText replaces the URL's password in text (a parser's message may quote it).
func redactText(text, rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.User == nil {
		return text
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return strings.ReplaceAll(text, pw, "[REDACTED]")
	}
	return text
}

// amqpConfig returns amqp091-go's configuration of the connection.
func (c Config) amqpConfig() (amqp.Config, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.ConnectionName)
	cfg := amqp.Config{
		Heartbeat:  c.Heartbeat,
		Properties: props,
		Locale:     "en_US",
		Dial:       amqp.DefaultDial(c.ConnectTimeout),
	}
	if c.Username != "" {
		cfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: c.Username, Password: c.Password}}
	}
	if c.TLS.On() {
		tc, err := c.TLS.config()
		if err != nil {
			return amqp.Config{}, err
		}
		cfg.TLSClientConfig = tc
	}
	return cfg, nil
}

// config builds the *tls.Config.
func (t TLSConfig) config() (*tls.Config, error) {
	return tlsfiles.Config(t.CAFile, t.CertFile, t.KeyFile, t.ServerName, t.InsecureSkipVerify)
}

// dial opens a connection with the configuration (defaults applied by the caller).
func (c Config) dial() (*amqp.Connection, error) {
	cfg, err := c.amqpConfig()
	if err != nil {
		return nil, err
	}
	conn, err := amqp.DialConfig(strings.TrimSpace(c.URL), cfg)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", redactURL(c.URL), scrubError(err, c))
	}
	return conn, nil
}

// scrubError keeps err (for errors.Is/As) unless its text holds a secret of c.
func scrubError(err error, c Config) error {
	text := redactText(err.Error(), c.URL)
	if c.Password != "" {
		text = strings.ReplaceAll(text, c.Password, "[REDACTED]")
	}
	if text == err.Error() {
		return err
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return fmt.Errorf("%s: %w", text, ErrConnection)
	}
	return errors.New(text)
}

// LogValue implements slog.LogValuer with the secrets redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redactURL(c.URL)),
		slog.String("username", c.Username),
		slog.String("password", redact(c.Password)),
		slog.Bool("tls", c.TLS.On()),
		slog.String("tls.ca_file", c.TLS.CAFile),
		slog.String("tls.cert_file", c.TLS.CertFile),
		slog.Bool("tls.insecure_skip_verify", c.TLS.InsecureSkipVerify),
		slog.String("connection_name", c.ConnectionName),
		slog.Int("partitions", c.Partitions),
		slog.String("queue_type", c.QueueType),
		slog.Bool("disable_topology", c.DisableTopology),
		slog.String("key_metadata", c.KeyMetadata),
		slog.Int("max_message_size", c.MaxMessageSize),
		slog.String("consumer_group", c.ConsumerGroup),
	)
}

// String prints the configuration with the secrets redacted.
func (c Config) String() string { return c.LogValue().String() }

// GoString is String, so %#v redacts too.
func (c Config) GoString() string { return c.String() }

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return "[REDACTED]"
}
