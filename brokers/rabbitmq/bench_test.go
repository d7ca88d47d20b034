package rabbitmq_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// BenchmarkPublishEach measures PublishEach with batches of 1000 persistent messages of 256 bytes
// spread over 1000, 100, 10 and 1 keys, to a topic with one queue and with 8 key-hash queues, on
// the RabbitMQ of scripts/services.sh: the cost of sending a key's messages one wave (one
// confirmation round trip) each, and of spreading a topic over queues. docs/rabbitmq.md has the
// figures.
//
//	go test -run '^$' -bench PublishEach -benchtime 10x ./brokers/rabbitmq
func BenchmarkPublishEach(b *testing.B) {
	url := testsupport.RabbitMQURL(b)
	payload := bytes.Repeat([]byte("x"), 256)
	for _, partitions := range []int{0, 8} {
		pub, err := rabbitmq.NewPublisher(rabbitmq.Config{URL: url, Partitions: partitions}, watermill.NopLogger{})
		if err != nil {
			b.Fatal(err)
		}
		for _, keys := range []int{1000, 100, 10, 1} {
			b.Run("partitions-"+strconv.Itoa(partitions)+"/keys-"+strconv.Itoa(keys), func(b *testing.B) {
				topic := testsupport.UniqueName("bench.k" + strconv.Itoa(keys))
				for b.Loop() {
					msgs := make([]*message.Message, 1000)
					for i := range msgs {
						msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
						msgs[i].Metadata.Set(rabbitmq.DefaultKeyMetadata, "k"+strconv.Itoa(i%keys))
					}
					for _, err := range pub.PublishEach(context.Background(), topic, msgs) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
				deleteTopic(b, url, topic, partitions)
			})
		}
		_ = pub.Close()
	}
}
