package nats_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// suiteFeatures describes this Pub/Sub honestly:
//   - ConsumerGroups: a consumer group is a durable queue consumer.
//   - ExactlyOnceDelivery false: at-least-once (an unacked message comes back after AckWait).
//   - GuaranteedOrder: the stream has one order and each subscription hands out one message at
//     a time.
//   - Persistent: file-stored streams.
//   - NewSubscriberReceivesOldMessages false: the suite's subscribers share one durable group,
//     which resumes where it acked; a new group starts at the stream's first message.
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

// TestUniversalPubSub runs Watermill's universal suite against an in-process NATS server, with
// a topic as one subject and with four key-hash partitions per topic.
func TestUniversalPubSub(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int
	}{{"subject-per-topic", 0}, {"partitions-4", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natsserver.Start(t, natsserver.Options{})
			newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				// AckWait 5s: a message left unacked by a closed subscriber comes back within the
				// suite's 15s reads.
				cfg := nats.Config{URLs: []string{srv.URL()}, Partitions: tc.partitions, ConsumerGroup: group, AckWait: 5 * time.Second}
				pub, err := nats.NewPublisher(cfg, watermill.NopLogger{})
				if err != nil {
					t.Fatalf("new publisher: %v", err)
				}
				sub, err := nats.NewSubscriber(cfg, watermill.NopLogger{})
				if err != nil {
					t.Fatalf("new subscriber: %v", err)
				}
				return pub, sub
			}
			tests.TestPubSub(t, suiteFeatures(),
				// A durable consumer: the suite expects a new subscriber to go on where the last one
				// stopped (TestContinueAfterSubscribeClose).
				func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, "suite") },
				newPubSub,
			)
		})
	}
}
