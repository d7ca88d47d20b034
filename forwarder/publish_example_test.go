package forwarder_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// printingPublisher is a plain Watermill publisher (Publish only) that prints each call.
type printingPublisher struct{}

func (printingPublisher) Publish(topic string, msgs ...*message.Message) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.UUID
	}
	fmt.Println("Publish", topic, ids)
	return nil
}

func (printingPublisher) Close() error { return nil }

// The forwarder publishes through a plain Watermill publisher in waves: one event per key per
// Publish call, so event 2 of order o-1 waits for event 1, while order o-2 shares the first call.
func ExampleOutcomePublisherOf() {
	event := func(id, orderID string) *message.Message {
		msg := message.NewMessage(id, nil)
		msg.Metadata.Set(outbox.MetadataAggregateType, "order")
		msg.Metadata.Set(outbox.MetadataAggregateID, orderID)
		return msg
	}
	pub := forwarder.OutcomePublisherOf(printingPublisher{}, nil, nil)
	errs := pub.PublishEach(context.Background(), "orders", []*message.Message{event("1", "o-1"), event("2", "o-1"), event("3", "o-2")})
	fmt.Println(errs)
	// Output:
	// Publish orders [1 3]
	// Publish orders [2]
	// [<nil> <nil> <nil>]
}
