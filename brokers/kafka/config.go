package kafka

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// Defaults of Config. Each is documented on its field.
const (
	DefaultClientID        = "outboxkit"
	DefaultVersion         = "2.8.0"
	DefaultCompression     = CompressionLZ4
	DefaultPartitioner     = PartitionerMurmur2
	DefaultKeyMetadata     = "aggregate_id"
	DefaultMessageMaxBytes = 1000000
	DefaultProducerRetries = 10
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultInitialOffset   = OffsetOldest
	DefaultNackResendSleep = 100 * time.Millisecond
	DefaultIsolationLevel  = ReadUncommitted
)

// Isolation levels accepted by Config.IsolationLevel.
const (
	// ReadUncommitted delivers every record in the log, including those of Kafka transactions
	// that were aborted or are still open: Kafka's own default, and the cheapest (no wait for a
	// transaction's outcome).
	ReadUncommitted = "read_uncommitted"
	// ReadCommitted delivers only the records of committed transactions (and non-transactional
	// records), and none past the first still-open transaction of a partition. Required to
	// consume a topic written by a relay in exactly_once delivery mode (docs/exactly-once.md).
	ReadCommitted = "read_committed"
)

// Compression codecs accepted by Config.Compression.
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLZ4    = "lz4"
	CompressionZstd   = "zstd"
)

// Partitioners accepted by Config.Partitioner.
const (
	// PartitionerMurmur2 places keys exactly like Kafka's Java client (and franz-go's default):
	// murmur2(key) & 0x7fffffff % partitions.
	PartitionerMurmur2 = "murmur2"
	// PartitionerFNV1a places keys like Sarama's default hash partitioner (FNV-1a, Sarama's own
	// sign handling): compatible with other Sarama producers only.
	PartitionerFNV1a = "fnv1a"
	// PartitionerCRC32 places keys like Sarama's NewConsistentCRCHashPartitioner: compatible
	// with librdkafka's "consistent" partitioner.
	PartitionerCRC32 = "crc32"
)

// SASL mechanisms accepted by SASLConfig.Mechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Initial offsets accepted by Config.InitialOffset.
const (
	OffsetOldest = "oldest"
	OffsetNewest = "newest"
)

// minVersion is the oldest protocol version accepted: Kafka 4 removed the request versions
// older than Kafka 2.1's (KIP-896), and Sarama picks request versions from Config.Version.
var minVersion = sarama.V2_1_0_0

// maxMessageMaxBytes is the largest accepted MessageMaxBytes: Kafka's default
// socket.request.max.bytes (100 MiB), which no produce request can exceed.
const maxMessageMaxBytes = 100 << 20

// Config configures the Kafka publisher (franz-go) and subscriber (watermill-kafka on Sarama)
// of outboxkit. The yaml tags are the keys
// of the broker configuration file (package brokerconfig); errors name fields by those keys.
type Config struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string `yaml:"brokers"`

	// ClientID identifies this client in the broker's logs and quotas. Default "outboxkit".
	ClientID string `yaml:"client_id"`

	// Version is the Kafka protocol version the subscriber's Sarama client speaks, "2.8.0" by
	// default. Sarama does not negotiate request versions, it derives them from this value: Kafka 4
	// rejects anything older than 2.1 (watermill-kafka's own default is 1.0, which Kafka 4
	// refuses). Raise it only to use a feature of a newer broker; the minimum accepted is 2.1.0.
	// The publisher (franz-go) negotiates request versions with each broker and ignores it.
	Version string `yaml:"version"`

	// TLS configures encryption and, with a client certificate, mutual authentication.
	TLS TLSConfig `yaml:"tls"`

	// SASL configures authentication. The password is never printed.
	SASL SASLConfig `yaml:"sasl"`

	// Compression of produced batches: none, gzip, snappy, lz4 or zstd. Default lz4: cheap on CPU
	// and usually halves JSON payloads; zstd compresses more at a higher CPU cost.
	Compression string `yaml:"compression"`

	// Partitioner maps a message key to a partition: murmur2 (default, the same partition as
	// Kafka's Java client and franz-go), fnv1a (Sarama's default) or crc32 (librdkafka's
	// "consistent"). Change it only together with every other producer of the topic, since a
	// change moves keys to other partitions.
	Partitioner string `yaml:"partitioner"`

	// KeyMetadata names the Watermill metadata entry whose value becomes the Kafka message key
	// (and so selects the partition). Default "aggregate_id". A message without that entry is
	// sent with an empty (not null) key, which is hashed like any other: all such messages of a
	// topic go to one partition.
	KeyMetadata string `yaml:"key_metadata"`

	// MessageMaxBytes is the largest message the producer accepts, measured as a record batch
	// holding that message alone (franz-go's ProducerBatchMaxBytes, which also caps every
	// batch), default 1000000, range 512..104857600. Keep it at or below the broker's
	// message.max.bytes (1048588 by default): then the publisher refuses an oversized message
	// before sending anything (with it, the later messages of its key in the same call), and
	// never builds a batch the broker would refuse; above it, the broker rejects the whole
	// per-partition batch holding it, other messages included.
	MessageMaxBytes int `yaml:"message_max_bytes"`

	// ProducerRetries is how many times the producer tries a record on retriable produce errors
	// inside one Publish call (franz-go's RecordRetries, and its UnknownTopicRetries: a topic just
	// auto-created may be unknown for a moment; default 10, minimum 1). With the
	// idempotent producer the limit is enforced only where it is safe (franz-go never gives up
	// on a request whose outcome it does not know), so a call may take longer.
	ProducerRetries int `yaml:"producer_retries"`

	// RetryBackoff is the wait between those retries (and the client's other request
	// retries), default 100ms.
	RetryBackoff time.Duration `yaml:"retry_backoff"`

	// ConsumerGroup is the subscriber's consumer group. Empty means no group: every subscriber
	// reads every partition from InitialOffset and nothing is committed.
	ConsumerGroup string `yaml:"consumer_group"`

	// InitialOffset is where a consumer group without committed offsets starts: oldest (default,
	// so nothing published before the group's first start is missed) or newest.
	InitialOffset string `yaml:"initial_offset"`

	// SessionTimeout, HeartbeatInterval and RebalanceTimeout tune the consumer group (Sarama's
	// Consumer.Group.*; defaults 10s, 3s and 60s). Shorter values detect dead members and finish
	// rebalances sooner, at the cost of more heartbeats and of evicting slow handlers.
	SessionTimeout    time.Duration `yaml:"session_timeout"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	RebalanceTimeout  time.Duration `yaml:"rebalance_timeout"`

	// NackResendSleep is how long the subscriber waits before redelivering a nacked message,
	// default 100ms.
	NackResendSleep time.Duration `yaml:"nack_resend_sleep"`

	// IsolationLevel is what the subscriber reads of Kafka transactions: read_uncommitted
	// (default, Kafka's own default) delivers every record, those of aborted transactions
	// included; read_committed delivers only committed ones, at the cost of waiting for a
	// partition's open transaction to end before the records behind it. Use read_committed on
	// topics written by a relay in exactly_once delivery mode, where an aborted (fenced or
	// crashed) transaction's records are in the log and would otherwise be delivered. The
	// default stays read_uncommitted because the at_least_once relay writes no transactions
	// (both levels then read the same) and other producers of a topic may rely on it.
	IsolationLevel string `yaml:"isolation_level"`

	// TopicPartitions and TopicReplicationFactor are used by the subscriber's
	// SubscribeInitialize to create a topic. 0 means the broker's default (num.partitions,
	// default.replication.factor).
	TopicPartitions        int32 `yaml:"topic_partitions"`
	TopicReplicationFactor int16 `yaml:"topic_replication_factor"`
}

// LogValue implements slog.LogValuer: every setting, with secrets redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("brokers", c.Brokers),
		slog.String("client_id", c.ClientID),
		slog.String("version", c.Version),
		slog.Group("tls",
			slog.Bool("enabled", c.TLS.On()),
			slog.String("ca_file", c.TLS.CAFile),
			slog.String("cert_file", c.TLS.CertFile),
			slog.String("key_file", c.TLS.KeyFile),
			slog.Bool("insecure_skip_verify", c.TLS.InsecureSkipVerify)),
		slog.Any("sasl", c.SASL.LogValue()),
		slog.String("compression", c.Compression),
		slog.String("partitioner", c.Partitioner),
		slog.String("key_metadata", c.KeyMetadata),
		slog.Int("message_max_bytes", c.MessageMaxBytes),
		slog.String("consumer_group", c.ConsumerGroup),
		slog.String("initial_offset", c.InitialOffset),
		slog.String("isolation_level", c.IsolationLevel),
	)
}

// String prints the configuration with secrets redacted.
func (c Config) String() string { return c.LogValue().String() }

// Security describes how the clients authenticate and encrypt, for errors and logs, e.g.
// "SASL SCRAM-SHA-512 as user relay, over TLS" or "no SASL, plaintext". It never holds a secret.
func (c Config) Security() string {
	auth := "no SASL"
	if c.SASL.Mechanism != "" {
		auth = fmt.Sprintf("SASL %s as user %q", c.SASL.Mechanism, c.SASL.Username)
	}
	if c.TLS.On() {
		return auth + ", over TLS"
	}
	return auth + ", plaintext"
}

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return "[REDACTED]"
}

// SetDefaults fills every unset field with its default. NewPublisher and NewSubscriber call it.
func (c *Config) SetDefaults() { c.setDefaults() }

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	if c.Partitioner == "" {
		c.Partitioner = DefaultPartitioner
	}
	if c.KeyMetadata == "" {
		c.KeyMetadata = DefaultKeyMetadata
	}
	if c.MessageMaxBytes == 0 {
		c.MessageMaxBytes = DefaultMessageMaxBytes
	}
	if c.ProducerRetries == 0 {
		c.ProducerRetries = DefaultProducerRetries
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.InitialOffset == "" {
		c.InitialOffset = DefaultInitialOffset
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = DefaultNackResendSleep
	}
	if c.IsolationLevel == "" {
		c.IsolationLevel = DefaultIsolationLevel
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 3 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 60 * time.Second
	}
}

// SaramaConfig applies the defaults, validates c and returns the Sarama configuration of the
// subscriber: protocol version, client id, TLS, SASL, consumer group timings, offsets and
// isolation level. It holds no producer settings: the publisher is built on franz-go (see
// kgoOptions); a Sarama producer built from it would not be idempotent and would not place keys
// like the publisher.
func (c Config) SaramaConfig() (*sarama.Config, error) {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	version, _ := sarama.ParseKafkaVersion(c.Version) // checked by Validate

	sc := sarama.NewConfig()
	sc.ClientID = c.ClientID
	sc.Version = version

	sc.Metadata.AllowAutoTopicCreation = true

	// Consumer.
	sc.Consumer.Return.Errors = true
	sc.Consumer.Group.Session.Timeout = c.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = c.HeartbeatInterval
	sc.Consumer.Group.Rebalance.Timeout = c.RebalanceTimeout
	if c.InitialOffset == OffsetNewest {
		sc.Consumer.Offsets.Initial = sarama.OffsetNewest
	} else {
		sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	}
	// Sarama sends read_committed from protocol 0.11 on; Validate guarantees minVersion (2.1).
	if c.IsolationLevel == ReadCommitted {
		sc.Consumer.IsolationLevel = sarama.ReadCommitted
	} else {
		sc.Consumer.IsolationLevel = sarama.ReadUncommitted
	}

	if c.TLS.On() {
		tc, err := c.TLS.build()
		if err != nil {
			return nil, fmt.Errorf("kafka config: %w", err)
		}
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = tc
	}

	if c.SASL.Mechanism != "" {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Handshake = true
		sc.Net.SASL.User = c.SASL.Username
		sc.Net.SASL.Password = c.SASL.Password
		switch c.SASL.Mechanism {
		case SASLPlain:
			sc.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case SASLScramSHA256:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &scramClient{hash: scram.HashGeneratorFcn(sha256.New)}
			}
		case SASLScramSHA512:
			sc.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &scramClient{hash: scram.HashGeneratorFcn(sha512.New)}
			}
		}
	}

	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka config: sarama rejected the configuration: %w", err)
	}
	return sc, nil
}
