package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

func TestSmoke(t *testing.T) {
	cfg := kafka.Config{Brokers: testsupport.KafkaBrokers(t), ConsumerGroup: testsupport.UniqueName("g")}
	pub, err := kafka.NewPublisher(cfg, watermill.NewStdLogger(true, false))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	topic := testsupport.UniqueName("smoke")
	var msgs []*message.Message
	for i := 0; i < 100; i++ {
		m := message.NewMessage(watermill.NewUUID(), []byte("x"))
		m.Metadata.Set("aggregate_id", "k")
		msgs = append(msgs, m)
	}
	start := time.Now()
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}
	t.Log(time.Since(start))
	sub, err := kafka.NewSubscriber(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ch, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		m := <-ch
		m.Ack()
	}
	t.Log(time.Since(start))
}
