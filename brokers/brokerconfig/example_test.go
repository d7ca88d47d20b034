package brokerconfig_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// Build a publisher and a subscriber from configuration. Here the in-process kfake cluster, so
// the example runs anywhere; "broker: kafka" with a kafka.brokers list is the only change for a
// real cluster (or OUTBOXKIT_BROKER=kafka OUTBOXKIT_KAFKA_BROKERS=host:9092 in the environment).
func ExampleBuild() {
	cfg, err := brokerconfig.Parse([]byte("broker: kfake\nkafka:\n  consumer_group: billing\n"), nil)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	brokers, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		panic(err)
	}
	defer brokers.Close() // closes the subscriber, the publisher and the in-process cluster

	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"total":42}`))
	msg.Metadata.Set("aggregate_id", "order-7")
	if err := brokers.Publisher().Publish("orders", msg); err != nil {
		panic(err)
	}

	sub, err := brokers.NewSubscriber("") // "" = the configured consumer group
	if err != nil {
		panic(err)
	}
	messages, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		panic(err)
	}
	got := <-messages
	got.Ack()
	fmt.Println(brokers.Broker(), got.Metadata.Get("aggregate_id"), string(got.Payload))
	// Output: kfake order-7 {"total":42}
}

// A bad field fails fast, named by its YAML path; secrets are never printed.
func ExampleParse() {
	_, err := brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [127.0.0.1:9092]\n  compression: brotli\n"), nil)
	fmt.Println(err)

	_, err = brokerconfig.Parse([]byte("broker: activemq\n"), nil)
	fmt.Println(err)

	cfg, _ := brokerconfig.Parse([]byte("broker: pulsar\npulsar:\n  url: pulsar://127.0.0.1:6650\n  auth_token: secret-jwt\n"), nil)
	fmt.Println(cfg.Pulsar.LogValue().Group()[1])
	// Output:
	// kafka.compression: unknown value "brotli" (allowed: none, gzip, snappy, lz4, zstd)
	// broker: unknown value "activemq" (allowed: kafka, pulsar, nats, rabbitmq, kfake)
	// auth_token=[REDACTED]
}
