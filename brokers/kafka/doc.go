// Package kafka publishes and consumes outboxkit events on Apache Kafka through Watermill:
// a batching Publisher (one pipelined, fully acknowledged batch per Publish call) and
// watermill-kafka's Subscriber, both configured from one Config (idempotent producer with
// acks=all, message key from metadata, compression, TLS, SASL, consumer groups), plus
// Retriable, the one place where broker errors are classified as retry or dead-letter.
package kafka
