// Package brokerconfig builds the outboxkit publisher and subscribers of the broker chosen by
// configuration (a YAML file with environment overrides): broker: kafka | pulsar | kfake is the
// whole switch (or nats, rabbitmq), and format: cloudevents makes the published messages CloudEvents.
package brokerconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/brokers/schema"
)

// Broker names accepted by Config.Broker.
const (
	BrokerKafka  = "kafka"
	BrokerPulsar = "pulsar"
	// BrokerNATS is NATS JetStream (brokers/nats).
	BrokerNATS = "nats"
	// BrokerRabbitMQ is RabbitMQ (brokers/rabbitmq).
	BrokerRabbitMQ = "rabbitmq"
	// BrokerKFake starts an in-process Kafka-protocol cluster (franz-go's kfake) and talks to it
	// with the Kafka adapter: for tests and demos, nothing is persisted.
	BrokerKFake = "kfake"
)

var allowedBrokers = []string{BrokerKafka, BrokerPulsar, BrokerNATS, BrokerRabbitMQ, BrokerKFake}

// Message formats accepted by Config.Format.
const (
	// FormatWatermill sends the Watermill message as it is: the payload as the value, the
	// metadata (the outbox fields and the event's headers) as Kafka headers or Pulsar properties.
	FormatWatermill = "watermill"
	// FormatCloudEvents sends the same message as a CloudEvent in binary content mode: the
	// metadata gains the ce_* attributes and content-type (see brokers/cloudevents), the outbox
	// fields are kept.
	FormatCloudEvents = "cloudevents"
)

var allowedFormats = []string{FormatWatermill, FormatCloudEvents}

// Config is the broker configuration: which broker, and one section per broker. Only the
// section of the chosen broker is used and validated (the kafka section also serves kfake).
type Config struct {
	// Broker is kafka, pulsar, nats, rabbitmq or kfake. Required.
	Broker string `yaml:"broker"`
	// Kafka configures the Kafka adapter (broker: kafka, and broker: kfake except brokers,
	// tls and sasl).
	Kafka kafka.Config `yaml:"kafka"`
	// Pulsar configures the Pulsar adapter (broker: pulsar).
	Pulsar PulsarConfig `yaml:"pulsar"`
	// NATS configures the NATS JetStream adapter (broker: nats).
	NATS nats.Config `yaml:"nats"`
	// RabbitMQ configures the RabbitMQ adapter (broker: rabbitmq).
	RabbitMQ rabbitmq.Config `yaml:"rabbitmq"`
	// KFake configures the in-process cluster (broker: kfake).
	KFake KFakeConfig `yaml:"kfake"`
	// Format is the format of the published messages: watermill (the default) or cloudevents.
	// It changes what the publisher sends, not what subscribers accept.
	Format string `yaml:"format"`
	// CloudEvents configures format: cloudevents; its source is then required.
	CloudEvents cloudevents.Config `yaml:"cloudevents"`
	// SchemaRegistry, when its url is set, makes the publisher encode each event's JSON payload
	// with the schema of its subject in this (Confluent-compatible) registry: on Kafka (and
	// kfake) Avro, Protobuf or JSON Schema in the Confluent wire format, with format cloudevents
	// carrying content-type and ce_dataschema; on Pulsar bare Avro with the subject's schema,
	// which the broker records in its own registry (see brokers/schema). Not NATS or RabbitMQ.
	SchemaRegistry schema.RegistryConfig `yaml:"schema_registry"`
}

// KFakeConfig configures the in-process kfake cluster.
type KFakeConfig struct {
	// Partitions is the partition count of auto-created topics. Default 4.
	Partitions int `yaml:"partitions"`
}

// DefaultKFakePartitions is the default of KFakeConfig.Partitions.
const DefaultKFakePartitions = 4

// Load reads the YAML file at path, applies the OUTBOXKIT_* environment overrides (see Env),
// fills the defaults and validates the result. Unknown YAML keys are errors; the outboxkit CLI's
// own sections (database, forwarder, http, log) are skipped, so Load reads the relay's file.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("broker config: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	if err != nil {
		return Config{}, fmt.Errorf("broker config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse is Load on YAML already read, with the environment given as a lookup function
// (os.LookupEnv for the process environment; nil for none). An empty document is allowed, so a
// configuration can come from the environment alone.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (Config, error) {
	cfg, err := decode(data)
	if err != nil {
		return Config{}, err
	}
	if lookupEnv != nil {
		if err := cfg.applyEnv(lookupEnv); err != nil {
			return Config{}, err
		}
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, cfg.nameEnvInError(err, lookupEnv)
	}
	return cfg, nil
}

// SetDefaults fills the unset fields of the chosen broker's section with their defaults.
func (c *Config) SetDefaults() {
	c.Broker = strings.ToLower(strings.TrimSpace(c.Broker))
	switch c.Broker {
	case BrokerKafka:
		c.Kafka.SetDefaults()
	case BrokerKFake:
		c.Kafka.SetDefaults()
	case BrokerPulsar:
		c.Pulsar.setDefaults()
	case BrokerNATS:
		c.NATS.SetDefaults()
	case BrokerRabbitMQ:
		c.RabbitMQ.SetDefaults()
	}
	if c.KFake.Partitions == 0 {
		c.KFake.Partitions = DefaultKFakePartitions
	}
	c.Format = strings.ToLower(strings.TrimSpace(c.Format))
	if c.Format == "" {
		c.Format = FormatWatermill
	}
}

// Validate checks the broker name and the chosen broker's section (with defaults applied to a
// copy) and returns the first problem, naming the field by its YAML path. Secrets never appear.
func (c Config) Validate() error {
	c.SetDefaults()
	switch c.Broker {
	case "":
		return fmt.Errorf("broker: missing (allowed: %s)", strings.Join(allowedBrokers, ", "))
	case BrokerKafka:
		if err := c.Kafka.Validate(); err != nil {
			return fmt.Errorf("kafka.%w", err)
		}
	case BrokerKFake:
		if c.KFake.Partitions < 1 {
			return fmt.Errorf("kfake.partitions: %d must be at least 1", c.KFake.Partitions)
		}
		if c.Kafka.TLS.On() {
			return errors.New("kafka.tls: not supported with broker kfake (the in-process cluster has no TLS)")
		}
		if c.Kafka.SASL.Mechanism != "" {
			return errors.New("kafka.sasl: not supported with broker kfake (the in-process cluster has no SASL)")
		}
		k := c.Kafka
		k.Brokers = []string{"127.0.0.1:0"} // replaced by the cluster's address in Build
		if err := k.Validate(); err != nil {
			return fmt.Errorf("kafka.%w", err)
		}
	case BrokerPulsar:
		if err := c.Pulsar.validate(); err != nil {
			return fmt.Errorf("pulsar.%w", err)
		}
	case BrokerNATS:
		if err := c.NATS.Validate(); err != nil {
			return fmt.Errorf("nats.%w", err)
		}
	case BrokerRabbitMQ:
		if err := c.RabbitMQ.Validate(); err != nil {
			return fmt.Errorf("rabbitmq.%w", err)
		}
	default:
		return fmt.Errorf("broker: unknown value %q (allowed: %s)", c.Broker, strings.Join(allowedBrokers, ", "))
	}
	switch c.Format {
	case FormatWatermill:
	case FormatCloudEvents:
		if c.CloudEvents.Source == "" {
			return errors.New("cloudevents.source: missing, required with format cloudevents " +
				"(a URI-reference such as /billing or https://example.com/billing)")
		}
		if err := c.CloudEvents.Validate(); err != nil {
			return fmt.Errorf("cloudevents.%w", err)
		}
	default:
		return fmt.Errorf("format: unknown value %q (allowed: %s)", c.Format, strings.Join(allowedFormats, ", "))
	}
	return c.validateSchemaRegistry()
}

// validateSchemaRegistry checks the schema_registry section when it is on.
func (c Config) validateSchemaRegistry() error {
	if !c.SchemaRegistry.On() {
		return nil
	}
	switch c.Broker {
	case BrokerKafka, BrokerKFake:
	case BrokerPulsar:
		if c.Format == FormatCloudEvents {
			return errors.New("schema_registry: not supported with broker pulsar and format cloudevents " +
				"(Pulsar carries the schema itself, not the Confluent ids ce_dataschema names)")
		}
	default:
		return fmt.Errorf("schema_registry: not supported with broker %s yet (kafka, kfake and pulsar only)", c.Broker)
	}
	if err := c.SchemaRegistry.Validate(); err != nil {
		return fmt.Errorf("schema_registry.%w", err)
	}
	return nil
}

// LogValue implements slog.LogValuer: the broker and its section, secrets redacted.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("broker", c.Broker)}
	switch c.Broker {
	case BrokerKafka:
		attrs = append(attrs, slog.Any("kafka", c.Kafka.LogValue()))
	case BrokerKFake:
		attrs = append(attrs, slog.Any("kafka", c.Kafka.LogValue()), slog.Int("kfake.partitions", c.KFake.Partitions))
	case BrokerPulsar:
		attrs = append(attrs, slog.Any("pulsar", c.Pulsar.LogValue()))
	case BrokerNATS:
		attrs = append(attrs, slog.Any("nats", c.NATS.LogValue()))
	case BrokerRabbitMQ:
		attrs = append(attrs, slog.Any("rabbitmq", c.RabbitMQ.LogValue()))
	}
	attrs = append(attrs, slog.String("format", c.Format))
	if c.Format == FormatCloudEvents {
		attrs = append(attrs, slog.Any("cloudevents", c.CloudEvents.LogValue()))
	}
	if c.SchemaRegistry.On() {
		attrs = append(attrs, slog.Any("schema_registry", c.SchemaRegistry.LogValue()))
	}
	return slog.GroupValue(attrs...)
}

// String prints the configuration with secrets redacted.
func (c Config) String() string { return c.LogValue().String() }

// GoString is String, so %#v redacts too.
func (c Config) GoString() string { return c.String() }
