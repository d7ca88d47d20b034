package nats_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// BenchmarkPublishEach measures PublishEach with batches of 1000 messages of 256 bytes spread
// over 1000, 100, 10 and 1 keys, against an in-process server with file storage: the cost of
// sending a key's messages one wave (one round trip) each. docs/nats.md has the figures.
//
//	go test -run '^$' -bench PublishEach -benchtime 20x ./brokers/nats
func BenchmarkPublishEach(b *testing.B) {
	srv := natsserver.Start(b, natsserver.Options{})
	pub, err := nats.NewPublisher(nats.Config{URLs: []string{srv.URL()}}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	payload := bytes.Repeat([]byte("x"), 256)
	for _, keys := range []int{1000, 100, 10, 1} {
		b.Run("keys-"+strconv.Itoa(keys), func(b *testing.B) {
			topic := "bench.k" + strconv.Itoa(keys)
			for b.Loop() {
				msgs := make([]*message.Message, 1000)
				for i := range msgs {
					msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
					msgs[i].Metadata.Set(nats.DefaultKeyMetadata, "k"+strconv.Itoa(i%keys))
				}
				for _, err := range pub.PublishEach(context.Background(), topic, msgs) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
