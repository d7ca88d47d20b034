// Package kafka publishes and consumes outboxkit events on Apache Kafka through Watermill:
// a Publisher on franz-go (idempotent producer with acks=all, murmur2 keys like the Java client,
// one pipelined produce per call, per-message outcomes that are gapless per key) and
// watermill-kafka's Subscriber on Sarama, both configured from one Config (message key from
// metadata, compression, TLS, SASL, consumer groups), plus Retriable, the one place where
// errors are classified as retry or dead-letter.
package kafka
