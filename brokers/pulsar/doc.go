// Package pulsar is a Watermill Publisher and Subscriber for Apache Pulsar, built on
// github.com/apache/pulsar-client-go and configured for the transactional outbox.
//
// The Publisher keeps one producer per topic, sends the metadata entry named by
// PublisherConfig.KeyMetadata (default "aggregate_id") as the Pulsar key and ordering key,
// every metadata entry as a property and the message UUID as UUIDProperty, batches, and
// returns from Publish only after the broker acknowledged every message.
//
// The Subscriber consumes a durable subscription (key_shared by default, which keeps
// per-key order across several consumers), delivers one message at a time, maps Ack/Nack
// to Pulsar's ack/nack and can dead-letter messages after a number of deliveries.
//
// It passes Watermill's universal Pub/Sub test suite against a real broker; see
// docs/pulsar.md for the guarantees, configuration and measured throughput.
package pulsar
