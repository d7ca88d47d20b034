package cloudevents_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/outbox"
)

// Wrap any publisher (here Watermill's in-memory GoChannel; brokerconfig does it for Kafka and
// Pulsar with format: cloudevents) so that every outbox event leaves as a CloudEvent in binary
// content mode: the ce_* attributes and content-type join the outbox metadata.
func ExampleNewPublisher() {
	ch := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1}, watermill.NopLogger{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	received, err := ch.Subscribe(ctx, "orders")
	if err != nil {
		panic(err)
	}
	pub, err := cloudevents.NewPublisher(ch, cloudevents.Config{Source: "/billing"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()

	event, _ := outbox.NewJSONEvent("orders", "order", "order-7", "OrderPlaced", map[string]int{"total": 42})
	event.ID = uuid.MustParse("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
	event.CreatedAt = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	if err := pub.Publish("orders", event.ToMessage()); err != nil {
		panic(err)
	}

	msg := <-received
	msg.Ack()
	var keys []string
	for k := range msg.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "ce_") || k == "content-type" {
			fmt.Printf("%s: %s\n", k, msg.Metadata[k])
		}
	}
	fmt.Println("outbox field kept, aggregate_type:", msg.Metadata.Get(outbox.MetadataAggregateType))
	fmt.Println("data:", string(msg.Payload))
	// Output:
	// ce_id: 0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b
	// ce_source: /billing
	// ce_specversion: 1.0
	// ce_subject: order-7
	// ce_time: 2026-12-01T09:30:00Z
	// ce_type: OrderPlaced
	// content-type: application/json
	// outbox field kept, aggregate_type: order
	// data: {"total":42}
}
