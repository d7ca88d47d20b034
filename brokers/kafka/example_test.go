package kafka_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// A Config needs only the brokers; everything else has an outbox-friendly default, and Validate
// names a bad field by its configuration key.
func ExampleConfig_Validate() {
	cfg := kafka.Config{Brokers: []string{"127.0.0.1:9092"}}
	fmt.Println(cfg.Validate())
	cfg.SetDefaults()
	fmt.Println("compression:", cfg.Compression, "partitioner:", cfg.Partitioner, "key:", cfg.KeyMetadata)

	cfg.Compression = "brotli"
	fmt.Println(cfg.Validate())
	// Output:
	// <nil>
	// compression: lz4 partitioner: murmur2 key: aggregate_id
	// compression: unknown value "brotli" (allowed: none, gzip, snappy, lz4, zstd)
}

// Publish a batch of keyed events: one pipelined produce; PublishEach reports each outcome.
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

	// Or one outcome per message: when a message fails, the later ones of its key fail too.
	for i, err := range pub.PublishEach(context.Background(), "orders", batch) {
		if err != nil {
			fmt.Println(batch[i].UUID, "failed, retry later:", kafka.Retriable(err))
		}
	}
}

// Retriable decides between retrying later and dead-lettering now.
func ExampleRetriable() {
	fmt.Println(kafka.Retriable(kerr.UnknownTopicOrPartition))
	fmt.Println(kafka.Retriable(kerr.TopicAuthorizationFailed))
	fmt.Println(kafka.Retriable(kerr.MessageTooLarge))
	fmt.Println(kafka.Retriable(kafka.ErrInvalidMessage))
	// Output:
	// true
	// true
	// false
	// false
}
