package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	DefaultName            = "outboxkit"
	DefaultConnectTimeout  = 5 * time.Second
	DefaultReconnectWait   = time.Second
	DefaultReplicas        = 1
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultStorage         = StorageFile
	DefaultKeyMetadata     = "aggregate_id"
	DefaultPublishTimeout  = 30 * time.Second
	DefaultMaxPending      = 4096
	DefaultAckWait         = 30 * time.Second
	DefaultCloseTimeout    = 30 * time.Second
	// MaxPartitions bounds Config.Partitions.
	MaxPartitions = 1024
)

// Storage values of Config.Storage.
const (
	StorageFile   = "file"
	StorageMemory = "memory"
)

// Config configures the connection, the streams this package creates, the Publisher and the
// Subscriber. Zero values take the defaults (setDefaults); Validate names the YAML key of a bad
// field. Password, Token and the content of the files are secrets: String and LogValue redact
// them, errors never contain them.
type Config struct {
	// URLs are the servers to connect to, nats://host:4222 or tls://host:4222 (the client picks
	// one and fails over to the others). Required.
	URLs []string `yaml:"urls"`
	// Name is the connection name the server shows in its monitoring. Default "outboxkit".
	Name string `yaml:"name"`

	// Username and Password authenticate with user/password (both or neither). Password is a
	// secret.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Token authenticates with a token. A secret.
	Token string `yaml:"token"`
	// NKeySeedFile is a file holding an NKey user seed (SU...): NKey authentication. The seed
	// never leaves the process; the file is read at connect.
	NKeySeedFile string `yaml:"nkey_seed_file"`
	// CredentialsFile is a .creds file (user JWT and NKey seed) for decentralized JWT auth.
	CredentialsFile string `yaml:"credentials_file"`

	// TLS configures TLS to the servers; off unless one of its fields is set or a URL is tls://.
	TLS TLSConfig `yaml:"tls"`

	// ConnectTimeout bounds the first connection (and each dial). Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// ReconnectWait is the pause between reconnection attempts to a server. Default 1s. The
	// client reconnects forever; publishes fail (retriably) meanwhile.
	ReconnectWait time.Duration `yaml:"reconnect_wait"`

	// Partitions is the number of key-hash partitions of a topic. 0 (the default): the topic is
	// one subject and the stream's total order is every key's order; a consumer keeps per-key
	// order only by consuming it one message at a time. N > 0: a message goes to the subject
	// <topic>.<fnv1a32(key) mod N>, the stream of the topic holds <topic>.*, and a consumer can
	// run one ordered consumer per partition subject in parallel (the Kafka model). Per-key order
	// on the publishing side is the same either way. At most 1024.
	Partitions int `yaml:"partitions"`
	// DeadLetterTopics are the topics of dead letters: whatever Partitions says, the stream of
	// each holds <topic>.*, and a dead letter goes to <topic>.<p> (p of Partitions, <topic>.0 with
	// Partitions 0). Installations with different Partitions share a dead-letter topic (the
	// forwarder's default, DefaultDeadLetterTopic, unless each sets its own): with the stream's
	// subjects depending on Partitions, the second installation found the first one's stream
	// with other subjects (ErrStreamMismatch) and could not dead-letter. Always <topic>.*, not
	// <topic>, so that a dead-letter topic named <topic>.dead does not overlap the stream of
	// <topic> with partitions. DefaultDeadLetterTopic always is one; add the forwarder's
	// Config.DeadLetterTopic when it is another (the relay, cmd/outboxkit, does). Not a YAML
	// key: the relay takes it from forwarder.dead_letter_topic.
	DeadLetterTopics []string `yaml:"-"`
	// Replicas is the replica count of the streams this package creates. Default 1; 3 or 5 on
	// a cluster (JetStream refuses more than 1 on a single server: the stream cannot be created
	// and publishes fail, retriably, until the setting is fixed).
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is the duplicate window of the streams this package creates: JetStream
	// drops a message whose Nats-Msg-Id (the event id) it stored within this window. Default 2m
	// (JetStream's own). Keep it above the relay's longest retry delay plus PublishTimeout, so
	// that a resend of a message whose acknowledgement was lost is always dropped.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// Storage is the stream storage: file (the default) or memory (lost on server restart).
	Storage string `yaml:"storage"`
	// MaxAge is the stream's retention age. Default 0: kept until the stream's limits say
	// otherwise (none by default).
	MaxAge time.Duration `yaml:"max_age"`
	// DisableStreamCreation stops the publisher and subscriber from creating a missing stream:
	// streams are then an operator's job, and publishing to a topic without one fails
	// (retriably, with the stream's name). Default false: created on first use.
	DisableStreamCreation bool `yaml:"disable_stream_creation"`

	// KeyMetadata is the metadata entry holding a message's partition key (the aggregate id).
	// Default "aggregate_id".
	KeyMetadata string `yaml:"key_metadata"`
	// PublishTimeout bounds the wait for one JetStream acknowledgement; a message not
	// acknowledged in time fails retriably (it may still be stored: the resend is then dropped
	// as a duplicate within DuplicateWindow). Default 30s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// MaxPending bounds the asynchronous publishes awaiting acknowledgement on the connection;
	// a publish beyond it waits. Default 4096.
	MaxPending int `yaml:"max_pending"`

	// ConsumerGroup names the durable JetStream consumer (and queue group) of the Subscriber:
	// subscribers of one group share the messages, a restarted one resumes after the last
	// acknowledged message. Empty: an ephemeral consumer per subscription that starts at the
	// first message of the stream.
	ConsumerGroup string `yaml:"consumer_group"`
	// AckWait is how long the server waits for a subscriber's ack before redelivering (and how
	// long the Subscriber waits for the handler). Default 30s.
	AckWait time.Duration `yaml:"ack_wait"`
	// SubscribersCount is the number of concurrent subscriptions per Subscribe (needs a
	// ConsumerGroup when above 1, otherwise each would get every message). Default 1, which
	// keeps the stream's order.
	SubscribersCount int `yaml:"subscribers_count"`
	// NakDelay is the delay before a Nacked message is redelivered. Default 0: at once.
	NakDelay time.Duration `yaml:"nak_delay"`
	// MaxDeliver is how often the server delivers a message before giving up on it. Default 0:
	// without limit.
	MaxDeliver int `yaml:"max_deliver"`
	// CloseTimeout bounds how long Close waits for handlers still working. Default 30s.
	CloseTimeout time.Duration `yaml:"close_timeout"`
}

// TLSConfig configures TLS to the NATS servers.
type TLSConfig struct {
	// Enabled turns TLS on. It is implied by any other field and by a tls:// URL.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities to trust; empty means the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key for mutual TLS (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify disables the server certificate check. For tests only: whoever sits
	// between the relay and the server then receives the credentials.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// On reports whether a TLS field is set.
func (t TLSConfig) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = DefaultReconnectWait
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	c.Storage = strings.ToLower(strings.TrimSpace(c.Storage))
	if c.Storage == "" {
		c.Storage = DefaultStorage
	}
	if c.KeyMetadata == "" {
		c.KeyMetadata = DefaultKeyMetadata
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.SubscribersCount == 0 {
		c.SubscribersCount = 1
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
}

// Validate checks the configuration (with defaults applied to a copy) and returns the first
// problem, starting with the field's YAML key. Secrets never appear in it.
func (c Config) Validate() error {
	c.SetDefaults()
	if len(c.URLs) == 0 {
		return errors.New("urls: missing, e.g. [nats://127.0.0.1:4222]")
	}
	for _, u := range c.URLs {
		if err := validateURL(u); err != nil {
			return err
		}
	}
	if (c.Username == "") != (c.Password == "") {
		return errors.New("username/password: set both or neither")
	}
	methods := 0
	for _, set := range []bool{c.Username != "", c.Token != "", c.NKeySeedFile != "", c.CredentialsFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return errors.New("username, token, nkey_seed_file, credentials_file: set one authentication method, not several")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("tls.cert_file/tls.key_file: set both or neither")
	}
	if c.Partitions < 0 || c.Partitions > MaxPartitions {
		return fmt.Errorf("partitions: %d out of range 0..%d", c.Partitions, MaxPartitions)
	}
	for _, topic := range c.DeadLetterTopics {
		if err := checkTopic(topic); err != nil {
			return fmt.Errorf("dead letter topic: %w", err)
		}
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("replicas: %d out of range 1..5", c.Replicas)
	}
	if c.DuplicateWindow < 0 {
		return fmt.Errorf("duplicate_window: %s must not be negative", c.DuplicateWindow)
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("max_age: %s must not be negative", c.MaxAge)
	}
	if c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge {
		return fmt.Errorf("duplicate_window: %s longer than max_age %s (JetStream refuses it)", c.DuplicateWindow, c.MaxAge)
	}
	if c.Storage != StorageFile && c.Storage != StorageMemory {
		return fmt.Errorf("storage: unknown value %q (allowed: %s, %s)", c.Storage, StorageFile, StorageMemory)
	}
	for key, d := range map[string]time.Duration{"connect_timeout": c.ConnectTimeout, "reconnect_wait": c.ReconnectWait,
		"publish_timeout": c.PublishTimeout, "ack_wait": c.AckWait, "close_timeout": c.CloseTimeout, "nak_delay": c.NakDelay} {
		if d < 0 {
			return fmt.Errorf("%s: %s must not be negative", key, d)
		}
	}
	if c.MaxPending < 1 {
		return fmt.Errorf("max_pending: %d must be at least 1", c.MaxPending)
	}
	if c.SubscribersCount < 1 {
		return fmt.Errorf("subscribers_count: %d must be at least 1", c.SubscribersCount)
	}
	if c.SubscribersCount > 1 && c.ConsumerGroup == "" {
		return fmt.Errorf("subscribers_count: %d needs a consumer_group (without one every subscription gets every message)", c.SubscribersCount)
	}
	if c.MaxDeliver < 0 {
		return fmt.Errorf("max_deliver: %d must not be negative", c.MaxDeliver)
	}
	if c.ConsumerGroup != "" && !validName(c.ConsumerGroup) {
		return fmt.Errorf("consumer_group: %q is not a valid JetStream consumer name (no spaces, '.', '*', '>', '/', '\\')", c.ConsumerGroup)
	}
	return nil
}

// validateURL checks one server URL; the userinfo (it may hold a password) is never echoed.
func validateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("urls: %q is not a URL such as nats://127.0.0.1:4222", redactURL(raw))
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
		return nil
	}
	return fmt.Errorf("urls: %q has scheme %q (allowed: nats, tls, ws, wss)", redactURL(raw), u.Scheme)
}

// redactURL hides the password of a URL's userinfo.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "[REDACTED]@" + raw[i+1:]
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	} else if u.User.Username() != "" {
		u.User = url.User("REDACTED") // a token in the user part
	}
	return u.String()
}

// streamConfig is the configuration of the stream this package creates for topic.
func (c Config) streamConfig(topic string) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if c.Storage == StorageMemory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        StreamName(topic),
		Description: "outboxkit topic " + topic,
		Subjects:    []string{c.filterSubject(topic)},
		Storage:     storage,
		Replicas:    c.Replicas,
		Duplicates:  c.DuplicateWindow,
		MaxAge:      c.MaxAge,
	}
}

// LogValue implements slog.LogValuer with the secrets redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("urls", c.redactedURLs()),
		slog.String("name", c.Name),
		slog.String("username", c.Username),
		slog.String("password", redact(c.Password)),
		slog.String("token", redact(c.Token)),
		slog.String("nkey_seed_file", c.NKeySeedFile),
		slog.String("credentials_file", c.CredentialsFile),
		slog.Bool("tls", c.TLS.On()),
		slog.String("tls.ca_file", c.TLS.CAFile),
		slog.String("tls.cert_file", c.TLS.CertFile),
		slog.Bool("tls.insecure_skip_verify", c.TLS.InsecureSkipVerify),
		slog.Int("partitions", c.Partitions),
		slog.Int("replicas", c.Replicas),
		slog.Duration("duplicate_window", c.DuplicateWindow),
		slog.String("storage", c.Storage),
		slog.String("key_metadata", c.KeyMetadata),
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
