// Package nats is a Watermill Publisher and Subscriber for NATS JetStream, configured for the
// transactional outbox.
//
// The Publisher is written directly on nats.go's JetStream client (github.com/nats-io/nats.go/
// jetstream) rather than on watermill-nats: the relay needs one outcome per message
// (forwarder.OutcomePublisher), and watermill-nats' Publish publishes synchronously and returns
// one error for the whole call. Here every message is published asynchronously and its own
// JetStream acknowledgement decides its outcome. Each message carries Nats-Msg-Id = the message
// UUID (the outbox event id), so JetStream's duplicate window drops a resend of a message it
// already stored.
//
// Ordering: one stream per topic. With Config.Partitions 0 (the default) a topic is one subject
// and the stream's order is every key's order; with Partitions N > 0 a message goes to the
// subject <topic>.<fnv1a(key) mod N>, so consumers can run one ordered consumer per partition.
// Either way PublishEach never has two messages of one key in flight: JetStream can fail one
// message and store the next one of the same connection (no responders while a stream starts,
// an acknowledgement lost with the connection), and no broker-side fence could undo that
// reordering. See docs/nats.md.
//
// The Subscriber is watermill-nats v2's (pkg/nats, JetStream mode) on streams this package
// provisions: a durable queue consumer per consumer group, explicit acks, Nack as NAK with an
// optional delay. Messages use watermill-nats' header format (NATSMarshaler), so a plain
// watermill-nats subscriber reads what this Publisher writes.
package nats
