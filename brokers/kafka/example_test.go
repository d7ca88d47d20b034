package kafka_test

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// A Config needs only the brokers; everything else has an outbox-friendly default.
func ExampleConfig_SaramaConfig() {
	cfg := kafka.Config{Brokers: []string{"127.0.0.1:9092"}}
	sc, err := cfg.SaramaConfig()
	if err != nil {
		panic(err)
	}
	fmt.Println("version:", sc.Version)
	fmt.Println("idempotent:", sc.Producer.Idempotent, "acks=all:", sc.Producer.RequiredAcks == sarama.WaitForAll)
	fmt.Println("max open requests:", sc.Net.MaxOpenRequests)
	fmt.Println("compression:", sc.Producer.Compression)

	cfg.Compression = "brotli"
	fmt.Println(cfg.Validate())
	// Output:
	// version: 2.8.0
	// idempotent: true acks=all: true
	// max open requests: 1
	// compression: lz4
	// compression: unknown value "brotli" (allowed: none, gzip, snappy, lz4, zstd)
}

// Publish a batch of keyed events: one pipelined request, acknowledged as a whole.
func ExampleNewPublisher() {
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, watermill.NopLogger{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()

	var batch []*message.Message
	for _, id := range []string{"order-1", "order-2", "order-1"} {
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{"status":"paid"}`))
		msg.Metadata.Set("aggregate_id", id) // becomes the Kafka key
		batch = append(batch, msg)
	}
	if err := pub.Publish("orders", batch...); err != nil {
		var pubErr *kafka.PublishError
		if errors.As(err, &pubErr) {
			fmt.Println("not acknowledged:", pubErr.FailedUUIDs(), "retry later:", kafka.Retriable(err))
		}
	}
}

// Retriable decides between retrying later and dead-lettering now.
func ExampleRetriable() {
	fmt.Println(kafka.Retriable(sarama.ErrUnknownTopicOrPartition))
	fmt.Println(kafka.Retriable(sarama.ErrLeaderNotAvailable))
	fmt.Println(kafka.Retriable(sarama.ErrMessageSizeTooLarge))
	fmt.Println(kafka.Retriable(sarama.ErrTopicAuthorizationFailed))
	// Output:
	// true
	// true
	// false
	// false
}
