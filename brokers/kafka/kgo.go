package kafka

import (
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// compressionCodecs maps Config.Compression to franz-go's codecs. Each entry falls back to no
// compression: franz-go sends a batch compressed only when that makes it smaller.
var compressionCodecs = map[string]kgo.CompressionCodec{
	CompressionNone:   kgo.NoCompression(),
	CompressionGzip:   kgo.GzipCompression(),
	CompressionSnappy: kgo.SnappyCompression(),
	CompressionLZ4:    kgo.Lz4Compression(),
	CompressionZstd:   kgo.ZstdCompression(),
}

// partitionerHashers maps Config.Partitioner to the hash that places a key on a partition.
// Every produced record has a key (possibly empty, never nil), so every record is hashed.
var partitionerHashers = map[string]kgo.PartitionerHasher{
	// kgo.KafkaHasher with kgo's murmur2 is the Java client's
	// toPositive(murmur2(key)) % partitions; a nil hasher means exactly that
	// (kgo.StickyKeyPartitioner: "if nil, this will return a partitioner that partitions
	// exactly how Kafka does"). Tested against the vectors of Kafka's own UtilsTest.
	PartitionerMurmur2: nil,
	// Sarama's NewHashPartitioner: int32(fnv32a(key)) % n, negated when negative.
	// kgo.SaramaCompatHasher reproduces that arithmetic (kgo.SaramaHasher does not on 64-bit).
	PartitionerFNV1a: kgo.SaramaCompatHasher(func(key []byte) uint32 {
		h := fnv.New32a()
		_, _ = h.Write(key) // a hash.Hash never fails to write
		return h.Sum32()
	}),
	// Sarama's NewConsistentCRCHashPartitioner: crc32(key) % n, unsigned (librdkafka's
	// "consistent").
	PartitionerCRC32: func(key []byte, n int) int {
		return int(crc32.ChecksumIEEE(key) % uint32(n))
	},
}

// partitioner returns the franz-go partitioner of Config.Partitioner (validated).
func partitioner(name string) kgo.Partitioner {
	return kgo.StickyKeyPartitioner(partitionerHashers[name])
}

// kgoOptions applies the defaults, validates c and maps it to the franz-go client options of
// the publisher, in one place:
//
//   - brokers, client id, TLS (DialTLSConfig), SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512
//     (franz-go's own sasl packages);
//   - idempotent producer (franz-go's default, never disabled here) with acks=all, so retries
//     neither duplicate nor reorder records within a partition;
//   - the partitioner of c.Partitioner (murmur2 by default, like the Java client);
//   - compression, MessageMaxBytes as ProducerBatchMaxBytes (with the broker write limit raised
//     above it, so that MessageMaxBytes is the limit that applies), ProducerRetries as
//     RecordRetries and as UnknownTopicRetries, RetryBackoff as a constant backoff;
//   - topic auto-creation requested in metadata requests, as Sarama did (the broker decides);
//   - no linger: a batch is built while the previous request is in flight, so one Publish of
//     many messages is still few requests, and a Publish of one message is not delayed by
//     franz-go's default 10ms linger.
//
// The consumer-only fields (consumer group, offsets, session timings, Version, topic details)
// do not apply to the publisher.
func (c Config) kgoOptions(logger watermill.LoggerAdapter) ([]kgo.Opt, error) {
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	backoff := c.RetryBackoff
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(partitioner(c.Partitioner)),
		kgo.ProducerBatchCompression(compressionCodecs[c.Compression], kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(int32(c.MessageMaxBytes)),
		kgo.BrokerMaxWriteBytes(int32(max(100<<20, c.MessageMaxBytes+1<<20))),
		kgo.RecordRetries(c.ProducerRetries),
		// A partition of a topic just auto-created may be unknown to its leader for a moment;
		// franz-go's default gives up after 4 such answers, which a broker started a minute
		// earlier took longer than (brokers/kafka/newtopic_test.go).
		kgo.UnknownTopicRetries(c.ProducerRetries),
		kgo.RetryBackoffFn(func(int) time.Duration { return backoff }),
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(0),
	}
	if logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{logger}))
	}
	if c.TLS.On() {
		tc, err := c.TLS.build()
		if err != nil {
			return nil, fmt.Errorf("kafka config: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch c.SASL.Mechanism {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha512Mechanism()))
	}
	return opts, nil
}

// kgoLogger passes franz-go's warnings and errors to the Watermill logger (franz-go logs
// nothing by default). Key-value pairs become log fields; franz-go's "err" value becomes the
// logged error (Watermill logs it under "error"), and a warning, which Watermill's logger has no
// level for, is logged at info with kafka_level=warn.
type kgoLogger struct{ l watermill.LoggerAdapter }

// Level implements kgo.Logger.
func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log implements kgo.Logger.
func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := watermill.LogFields{"component": "outboxkit.kafka.client"}
	var err error
	for i := 0; i+1 < len(keyvals); i += 2 {
		key := fmt.Sprint(keyvals[i])
		if e, ok := keyvals[i+1].(error); ok && key == "err" && err == nil {
			err = e
			continue
		}
		fields[key] = keyvals[i+1]
	}
	switch level {
	case kgo.LogLevelError:
		if err == nil {
			err = errors.New(msg)
		}
		k.l.Error(msg, err, fields)
		return
	case kgo.LogLevelWarn:
		fields["kafka_level"] = "warn"
	}
	if err != nil {
		fields["error"] = err.Error()
	}
	if level <= kgo.LogLevelInfo {
		k.l.Info(msg, fields)
	} else {
		k.l.Debug(msg, fields)
	}
}
