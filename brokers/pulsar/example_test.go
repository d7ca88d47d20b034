package pulsar_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
)

// ExampleConfig_FullTopicName shows how topic names passed to Publish and Subscribe are
// expanded.
func ExampleConfig_FullTopicName() {
	cfg := pulsar.Config{Tenant: "acme", Namespace: "shop"}
	for _, topic := range []string{"orders", "billing/events/invoices", "non-persistent://public/default/ticks"} {
		full, _ := cfg.FullTopicName(topic)
		fmt.Println(full)
	}
	// Output:
	// persistent://acme/shop/orders
	// persistent://billing/events/invoices
	// non-persistent://public/default/ticks
}

// ExampleSubscriberConfig_Validate shows that a bad field fails fast, named, with no broker.
func ExampleSubscriberConfig_Validate() {
	cfg := pulsar.SubscriberConfig{
		Config:           pulsar.Config{URL: "pulsar://127.0.0.1:6650", AuthToken: "secret"},
		SubscriptionName: "billing",
		SubscriptionType: "fanout",
	}
	_, err := pulsar.NewSubscriber(cfg, watermill.NopLogger{})
	fmt.Println(err)
	// Output:
	// pulsar: invalid subscriber config: SubscriptionType "fanout" is not one of key_shared, shared, failover, exclusive
}

// ExampleNewPublisher publishes an event keyed by its aggregate and consumes it back with
// a key_shared subscription. It needs a broker (OUTBOXKIT_PULSAR_URL), so it has no Output
// line and is compiled, not run, by go test.
func ExampleNewPublisher() {
	url := os.Getenv("OUTBOXKIT_PULSAR_URL") // e.g. pulsar://127.0.0.1:6650
	logger := watermill.NewSlogLogger(nil)

	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{
		Config: pulsar.Config{URL: url},
		// KeyMetadata defaults to "aggregate_id": that entry becomes the Pulsar key.
	}, logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()

	sub, err := pulsar.NewSubscriber(pulsar.SubscriberConfig{
		Config:              pulsar.Config{URL: url},
		SubscriptionName:    "billing",                    // the consumer group
		SubscriptionType:    pulsar.SubscriptionKeyShared, // default: per-key order
		NackRedeliveryDelay: 5 * time.Second,
		DeadLetter:          &pulsar.DeadLetterPolicy{MaxDeliveries: 5, InitialSubscription: "ops"},
	}, logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize("orders"); err != nil { // the subscription now exists
		fmt.Println(err)
		return
	}

	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"total":42}`))
	msg.Metadata.Set("aggregate_id", "order-1")
	msg.Metadata.Set("event_type", "OrderPlaced")
	if err := pub.Publish("orders", msg); err != nil { // returns after the broker's ack
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	messages, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	received := <-messages
	fmt.Println(received.UUID == msg.UUID, received.Metadata.Get("event_type"))
	received.Ack()
}
