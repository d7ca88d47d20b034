// Package rabbitmq is a Watermill Publisher and Subscriber for RabbitMQ (AMQP 0-9-1), configured
// for the transactional outbox.
//
// Layout: a topic is a durable direct exchange of the same name. With Config.Partitions 0 (the
// default) it routes every message to one queue named after the topic (routing key = the
// topic); with Partitions N > 0 a message goes, by the routing key <topic>.<p> where p =
// fnv1a32(key) mod N, to the queue <topic>.<p>. Queues are durable classic queues
// with single-active-consumer, so that one consumer at a time reads a queue, in queue order:
// that is the ordering scope RabbitMQ gives, and every message of one key is in one queue. The
// publisher declares the exchange and the queues of its consumer group on first use (unless
// Config.DisableTopology), so nothing published before the first subscriber is lost.
//
// The Publisher is written directly on github.com/rabbitmq/amqp091-go rather than on
// watermill-amqp: the relay needs one outcome per message (forwarder.OutcomePublisher), and
// watermill-amqp's Publish returns one error for a whole call (with ConfirmDelivery it waits for
// each confirmation in turn, and it has no way to report a message the broker returned as
// unroutable). Here every message is published on a channel in confirm mode with the mandatory
// flag: the broker's confirmation (basic.ack) decides its outcome, a basic.nack or a lost channel
// fails it retriably, and a basic.return (no queue bound for its routing key) is a permanent
// refusal of that message (ErrUnroutable) when the topology is an operator's
// (Config.DisableTopology); when the publisher declares the topology itself, a return means its
// queue was deleted behind its back: retriable (ErrQueueMissing), and declared again. Messages use watermill-amqp's format (DefaultMarshaler: metadata as
// headers, the UUID in _watermill_message_uuid, persistent), with the UUID as the AMQP
// message-id too, so a plain watermill-amqp subscriber reads what this Publisher writes.
//
// The Subscriber is watermill-amqp v3's, on the queues of this package: ack and nack are AMQP
// ack and nack (requeue), one unacknowledged message at a time per queue (prefetch 1), which
// keeps the queue's order across a nack.
//
// RabbitMQ has no broker-side deduplication: a message whose confirmation was lost (connection
// lost after the broker stored it) is published again by the relay and is then in the queue
// twice. Consumers deduplicate by the message UUID (the outbox event id), as with every
// at-least-once broker. See docs/rabbitmq.md.
package rabbitmq
