package kafka

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
)

// Validate checks every field and returns the first problem, naming the field and its value
// (never a secret's value). Unset fields are checked with their defaults.
func (c Config) Validate() error {
	c.setDefaults()
	for _, check := range []func() error{c.validateProducer, c.validateConsumer, c.validateSecurity} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateProducer checks the brokers and the producer's settings.
func (c Config) validateProducer() error {
	if len(c.Brokers) == 0 {
		return errors.New("brokers: missing, at least one host:port is required")
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" || !strings.Contains(b, ":") {
			return fmt.Errorf("brokers[%d]: %q is not a host:port address", i, b)
		}
	}
	if c.ClientID == "" {
		return errors.New("client_id: must not be empty")
	}
	v, err := sarama.ParseKafkaVersion(c.Version)
	if err != nil {
		return fmt.Errorf("version: %q is not a Kafka version like 2.8.0: %w", c.Version, err)
	}
	if !v.IsAtLeast(minVersion) {
		return fmt.Errorf("version: %q is older than %s, which Kafka 4 requires", c.Version, minVersion)
	}
	if _, ok := compressionCodecs[c.Compression]; !ok {
		return fmt.Errorf("compression: unknown value %q (allowed: none, gzip, snappy, lz4, zstd)", c.Compression)
	}
	if _, ok := partitionerHashers[c.Partitioner]; !ok {
		return fmt.Errorf("partitioner: unknown value %q (allowed: murmur2, fnv1a, crc32)", c.Partitioner)
	}
	if c.KeyMetadata == "" {
		return errors.New("key_metadata: must not be empty")
	}
	if c.MessageMaxBytes < 512 || c.MessageMaxBytes > maxMessageMaxBytes {
		return fmt.Errorf("message_max_bytes: %d is outside 512..%d", c.MessageMaxBytes, maxMessageMaxBytes)
	}
	if c.ProducerRetries < 1 {
		return fmt.Errorf("producer_retries: %d must be at least 1", c.ProducerRetries)
	}
	if c.RetryBackoff < 0 {
		return fmt.Errorf("retry_backoff: %s must not be negative", c.RetryBackoff)
	}
	if c.TopicPartitions < 0 {
		return fmt.Errorf("topic_partitions: %d must not be negative", c.TopicPartitions)
	}
	if c.TopicReplicationFactor < 0 {
		return fmt.Errorf("topic_replication_factor: %d must not be negative", c.TopicReplicationFactor)
	}
	return nil
}

// validateConsumer checks the subscriber's settings.
func (c Config) validateConsumer() error {
	if c.InitialOffset != OffsetOldest && c.InitialOffset != OffsetNewest {
		return fmt.Errorf("initial_offset: unknown value %q (allowed: oldest, newest)", c.InitialOffset)
	}
	if c.NackResendSleep < 0 {
		return fmt.Errorf("nack_resend_sleep: %s must not be negative", c.NackResendSleep)
	}
	if c.IsolationLevel != ReadUncommitted && c.IsolationLevel != ReadCommitted {
		return fmt.Errorf("isolation_level: unknown value %q (allowed: %s, %s)", c.IsolationLevel, ReadUncommitted, ReadCommitted)
	}
	if c.SessionTimeout < 0 {
		return fmt.Errorf("session_timeout: %s must not be negative", c.SessionTimeout)
	}
	if c.HeartbeatInterval < 0 || c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("heartbeat_interval: %s must be positive and below session_timeout %s", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.RebalanceTimeout < 0 {
		return fmt.Errorf("rebalance_timeout: %s must not be negative", c.RebalanceTimeout)
	}
	return nil
}
