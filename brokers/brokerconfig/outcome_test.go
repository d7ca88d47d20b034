package brokerconfig_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// The Kafka publisher Build makes (here on kfake) is the franz-go kafka.Publisher, with the
// per-message outcomes the forwarder looks for (its OutcomePublisher, structurally).
func TestBuildKafkaPublisherReportsOutcomes(t *testing.T) {
	_, b := buildYAML(t, context.Background(), "broker: kfake\n")
	if _, ok := b.Publisher().(*kafka.Publisher); !ok {
		t.Fatalf("publisher is a %T, want *kafka.Publisher", b.Publisher())
	}
	op, ok := b.Publisher().(interface {
		PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
	})
	if !ok {
		t.Fatal("the Kafka publisher has no PublishEach")
	}
	msgs := []*message.Message{message.NewMessage(watermill.NewUUID(), []byte("a")), message.NewMessage(watermill.NewUUID(), []byte("b"))}
	for i, err := range op.PublishEach(context.Background(), "outcomes", msgs) {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
}
