package pulsar_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestSubscriberDeadLetter nacks a message MaxDeliveries times and finds it, with its UUID
// and metadata, on the dead-letter topic.
func TestSubscriberDeadLetter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("dlq_src")
	dlqTopic := testsupport.UniqueName("dlq")
	sub := newTestSubscriber(t, func(c *pulsar.SubscriberConfig) {
		c.SubscriptionType = pulsar.SubscriptionShared
		c.DeadLetter = &pulsar.DeadLetterPolicy{MaxDeliveries: 2, Topic: dlqTopic, InitialSubscription: "ops"}
	})
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	poison := message.NewMessage(watermill.NewUUID(), []byte("poison"))
	poison.Metadata.Set("aggregate_id", "order-1")
	if err := newTestPublisher(t, nil).Publish(topic, poison); err != nil {
		t.Fatal(err)
	}

	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case msg := <-ch:
			if msg.UUID != poison.UUID {
				t.Fatalf("delivery %d: got %s, want %s", i, msg.UUID, poison.UUID)
			}
			msg.Nack()
		case <-ctx.Done():
			t.Fatalf("delivery %d: %v", i, ctx.Err())
		}
	}

	dlqSub := newTestSubscriber(t, func(c *pulsar.SubscriberConfig) { c.SubscriptionName = "ops" })
	dlqCh, err := dlqSub.Subscribe(ctx, dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(ctx, t, dlqCh, 1)[0]
	if got.UUID != poison.UUID || string(got.Payload) != "poison" || got.Metadata.Get("aggregate_id") != "order-1" {
		t.Fatalf("dead letter: uuid %s payload %q metadata %v, want %s", got.UUID, got.Payload, got.Metadata, poison.UUID)
	}
	t.Logf("dead letter metadata: %v", got.Metadata)
}

// TestNackRedelivers checks a nacked message comes back after NackRedeliveryDelay and
// that its context ends with the Nack.
func TestNackRedelivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("nack")
	sub := newTestSubscriber(t, nil)
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	sent := message.NewMessage(watermill.NewUUID(), []byte("1"))
	if err := newTestPublisher(t, nil).Publish(topic, sent); err != nil {
		t.Fatal(err)
	}
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var nacked *message.Message
	select {
	case nacked = <-ch:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if nacked.UUID != sent.UUID {
		t.Fatalf("got %s, want %s", nacked.UUID, sent.UUID)
	}
	nacked.Nack()
	select {
	case <-nacked.Context().Done():
	case <-ctx.Done():
		t.Fatal("message context not cancelled after Nack")
	}
	if again := receive(ctx, t, ch, 1)[0]; again.UUID != sent.UUID {
		t.Fatalf("redelivered %s, want %s", again.UUID, sent.UUID)
	}
}

// TestSubscriberClose closes the channels of running subscriptions and refuses new ones.
func TestSubscriberClose(t *testing.T) {
	sub := newTestSubscriber(t, nil)
	ctx := context.Background()
	ch1, err := sub.Subscribe(ctx, testsupport.UniqueName("close1"))
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := sub.Subscribe(ctx, testsupport.UniqueName("close2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the consume goroutines, so both channels are already closed.
	for i, ch := range []<-chan *message.Message{ch1, ch2} {
		select {
		case _, open := <-ch:
			if open {
				t.Errorf("channel %d delivered a message after Close", i)
			}
		default:
			t.Errorf("channel %d still open after Close returned", i)
		}
	}
	if _, err := sub.Subscribe(ctx, "x"); !errors.Is(err, pulsar.ErrSubscriberClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrSubscriberClosed", err)
	}
	if err := sub.SubscribeInitialize("x"); !errors.Is(err, pulsar.ErrSubscriberClosed) {
		t.Errorf("SubscribeInitialize after Close: %v, want ErrSubscriberClosed", err)
	}
	if err := sub.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestExclusiveRefusesSecondConsumer: an exclusive subscription's second Subscribe fails.
func TestExclusiveRefusesSecondConsumer(t *testing.T) {
	topic := testsupport.UniqueName("exclusive")
	sub := newTestSubscriber(t, func(c *pulsar.SubscriberConfig) {
		c.SubscriptionType = pulsar.SubscriptionExclusive
		c.OperationTimeout = 10 * time.Second
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := sub.Subscribe(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(ctx, topic); err == nil {
		t.Fatal("second consumer on an exclusive subscription was accepted")
	}
}
