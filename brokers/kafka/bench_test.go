package kafka_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// BenchmarkPublishHotKey publishes 1000 messages of one key (256-byte payloads) to the real
// Kafka per iteration, through the Publisher (idempotent, acks=all, lz4), in two ways:
//
//   - batch: one PublishEach call with all 1000 (one pipelined produce);
//   - one-at-a-time: 1000 Publish calls of one message each, each waiting for its
//     acknowledgement, which is what per-key order costs a publisher without per-message
//     outcomes (and what the forwarder's fallback does for a hot key).
//
// msgs/s is reported.
//
//	go test -run '^$' -bench BenchmarkPublishHotKey -benchtime 5x ./brokers/kafka/
func BenchmarkPublishHotKey(b *testing.B) {
	brokers := testsupport.KafkaBrokers(b)
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	const perIteration = 1000
	run := map[string]func(b *testing.B, pub *kafka.Publisher, topic string, msgs []*message.Message){
		"batch": func(b *testing.B, pub *kafka.Publisher, topic string, msgs []*message.Message) {
			for i, err := range pub.PublishEach(context.Background(), topic, msgs) {
				if err != nil {
					b.Fatalf("message %d: %v", i, err)
				}
			}
		},
		"one-at-a-time": func(b *testing.B, pub *kafka.Publisher, topic string, msgs []*message.Message) {
			for i, m := range msgs {
				if err := pub.Publish(topic, m); err != nil {
					b.Fatalf("message %d: %v", i, err)
				}
			}
		},
	}
	for _, name := range []string{"batch", "one-at-a-time"} {
		b.Run(name, func(b *testing.B) {
			pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			topic := testsupport.UniqueName("bench_hot")
			// Create the topic and warm up metadata and connections outside the timing.
			if err := pub.Publish(topic, keyed("hot", payload)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				msgs := make([]*message.Message, perIteration)
				for i := range msgs {
					msgs[i] = keyed("hot", payload)
				}
				b.StartTimer()
				run[name](b, pub, topic, msgs)
			}
			b.ReportMetric(float64(b.N*perIteration)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
