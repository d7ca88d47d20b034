package pulsar

import (
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

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
