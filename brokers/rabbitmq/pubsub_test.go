package rabbitmq_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
)

// suiteFeatures describes this Pub/Sub honestly:
//   - ConsumerGroups: a group has queues of its own, bound to the topic's routing keys.
//   - ExactlyOnceDelivery false: at-least-once (a message left unacked by a closed subscriber
//     is requeued).
//   - GuaranteedOrder: a queue has one order, single-active-consumer lets one consumer at a
//     time read it, and prefetch 1 hands out one message at a time.
//   - Persistent: durable queues, persistent messages.
//   - NewSubscriberReceivesOldMessages: the publisher declares the queues of its group, which
//     keep what it published before the first subscriber.
func suiteFeatures() tests.Features {
	return tests.Features{
		ConsumerGroups:                      true,
		ExactlyOnceDelivery:                 false,
		GuaranteedOrder:                     true,
		GuaranteedOrderWithSingleSubscriber: true,
		Persistent:                          true,
		NewSubscriberReceivesOldMessages:    false,
	}
}

// TestUniversalPubSub runs Watermill's universal suite against the RabbitMQ node of
// scripts/services.sh, with a queue per topic and with four key-hash queues per topic.
func TestUniversalPubSub(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int
	}{{"queue-per-topic", 0}, {"partitions-4", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			url := testConfig(t).URL
			newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				cfg := rabbitmq.Config{URL: url, Partitions: tc.partitions, ConsumerGroup: group}
				pub, err := rabbitmq.NewPublisher(cfg, watermill.NopLogger{})
				if err != nil {
					t.Fatalf("new publisher: %v", err)
				}
				sub, err := rabbitmq.NewSubscriber(cfg, watermill.NopLogger{})
				if err != nil {
					t.Fatalf("new subscriber: %v", err)
				}
				return pub, sub
			}
			tests.TestPubSub(t, suiteFeatures(),
				func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "") },
				newPubSub,
			)
		})
	}
}
