package pulsar_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestPublishKeyPropertiesAndUUID checks what reaches the broker (with a plain
// pulsar-client-go consumer) and what the Subscriber gives back.
func TestPublishKeyPropertiesAndUUID(t *testing.T) {
	url := testsupport.PulsarURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("keyed")
	fullTopic := "persistent://public/default/" + topic

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: fullTopic, SubscriptionName: "raw", Type: apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sub := newTestSubscriber(t, nil)
	if err := sub.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}

	keyed := message.NewMessage(watermill.NewUUID(), []byte("placed"))
	keyed.Metadata.Set("aggregate_id", "order-1")
	keyed.Metadata.Set("event_type", "OrderPlaced")
	unkeyed := message.NewMessage(watermill.NewUUID(), []byte("tick"))
	unkeyed.Metadata.Set("event_type", "Tick")
	sent := []*message.Message{keyed, unkeyed}

	pub := newTestPublisher(t, nil)
	if err := pub.Publish(topic, sent...); err != nil {
		t.Fatalf("publish: %v", err)
	}

	for i, want := range sent {
		got, err := raw.Receive(ctx)
		if err != nil {
			t.Fatalf("raw receive %d: %v", i, err)
		}
		_ = raw.Ack(got)
		wantKey := want.Metadata.Get("aggregate_id")
		if got.Key() != wantKey || got.OrderingKey() != wantKey {
			t.Errorf("message %d: key %q ordering key %q, want %q for both", i, got.Key(), got.OrderingKey(), wantKey)
		}
		wantProps := map[string]string{pulsar.UUIDProperty: want.UUID}
		for k, v := range want.Metadata {
			wantProps[k] = v
		}
		if fmt.Sprint(got.Properties()) != fmt.Sprint(wantProps) {
			t.Errorf("message %d: properties %v, want %v", i, got.Properties(), wantProps)
		}
		if !bytes.Equal(got.Payload(), want.Payload) {
			t.Errorf("message %d: payload %q, want %q", i, got.Payload(), want.Payload)
		}
	}

	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range receive(ctx, t, ch, len(sent)) {
		want := sent[i]
		if got.UUID != want.UUID || !bytes.Equal(got.Payload, want.Payload) ||
			fmt.Sprint(got.Metadata) != fmt.Sprint(want.Metadata) {
			t.Errorf("subscriber message %d: uuid %s payload %q metadata %v, want %s %q %v",
				i, got.UUID, got.Payload, got.Metadata, want.UUID, want.Payload, want.Metadata)
		}
	}
}

// TestPublishCustomKeyMetadata checks that KeyMetadata chooses the entry used as key.
func TestPublishCustomKeyMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("customkey")
	pub := newTestPublisher(t, func(c *pulsar.PublisherConfig) { c.KeyMetadata = "customer_id" })
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: testsupport.PulsarURL(t), Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "raw", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	msg.Metadata.Set("aggregate_id", "order-9")
	msg.Metadata.Set("customer_id", "customer-7")
	if err := pub.Publish(topic, msg); err != nil {
		t.Fatal(err)
	}
	got, err := raw.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key() != "customer-7" || got.OrderingKey() != "customer-7" {
		t.Fatalf("key %q ordering key %q, want customer-7", got.Key(), got.OrderingKey())
	}
}

// TestKeySharedKeepsPerKeyOrder publishes interleaved keys in one call and consumes them
// with two consumers of one key_shared subscription: each key's messages arrive in order.
func TestKeySharedKeepsPerKeyOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("keyorder")
	sub := newTestSubscriber(t, nil) // key_shared is the default
	ch1, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	const keys, perKey = 8, 50
	var msgs []*message.Message
	for i := range perKey {
		for k := range keys {
			msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "%d", i))
			msg.Metadata.Set("aggregate_id", fmt.Sprintf("key-%d", k))
			msgs = append(msgs, msg)
		}
	}
	if err := newTestPublisher(t, nil).Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}

	next := map[string]int{}
	keyConsumer := map[string]int{}
	for received := 0; received < len(msgs); received++ {
		var msg *message.Message
		consumer := 1
		select {
		case msg = <-ch1:
		case msg = <-ch2:
			consumer = 2
		case <-ctx.Done():
			t.Fatalf("received %d of %d: %v", received, len(msgs), ctx.Err())
		}
		key := msg.Metadata.Get("aggregate_id")
		if string(msg.Payload) != fmt.Sprint(next[key]) {
			t.Fatalf("key %s: got message %s, want %d (order broken)", key, msg.Payload, next[key])
		}
		if prev, ok := keyConsumer[key]; ok && prev != consumer {
			t.Errorf("key %s moved from consumer %d to %d", key, prev, consumer)
		}
		keyConsumer[key] = consumer
		next[key]++
		msg.Ack()
	}
	t.Logf("key to consumer: %v", keyConsumer)
}

// TestPublishAfterClose returns ErrPublisherClosed instead of hanging or panicking.
func TestPublishAfterClose(t *testing.T) {
	pub := newTestPublisher(t, nil)
	topic := testsupport.UniqueName("closed")
	if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
		t.Fatalf("publish before close: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("x")))
	if !errors.Is(err, pulsar.ErrPublisherClosed) {
		t.Fatalf("publish after close: %v, want ErrPublisherClosed", err)
	}
}

// publishWithin runs Publish and fails the test if it has not returned after limit: the
// point is that it returns (an error), not how fast.
func publishWithin(t *testing.T, limit time.Duration, pub message.Publisher, topic string, msgs ...*message.Message) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- pub.Publish(topic, msgs...) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Publish to %s still blocked after %s", topic, limit)
		return nil
	}
}

// TestPublishRejectedByBroker terminates the topic through the admin API: the broker then
// refuses every message, and Publish must report each one by UUID.
func TestPublishRejectedByBroker(t *testing.T) {
	topic := testsupport.UniqueName("terminated")
	pub := newTestPublisher(t, func(c *pulsar.PublisherConfig) {
		c.SendTimeout = 10 * time.Second
		c.OperationTimeout = 10 * time.Second
	})
	if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("before"))); err != nil {
		t.Fatalf("publish before terminate: %v", err)
	}
	adminPost(t, topicAdminPath("persistent://public/default/"+topic)+"/terminate")

	msgs := []*message.Message{
		message.NewMessage(watermill.NewUUID(), []byte("after-1")),
		message.NewMessage(watermill.NewUUID(), []byte("after-2")),
	}
	err := publishWithin(t, 2*time.Minute, pub, topic, msgs...)
	if err == nil {
		t.Fatal("publish to a terminated topic succeeded")
	}
	for _, msg := range msgs {
		if !strings.Contains(err.Error(), msg.UUID) {
			t.Errorf("error does not name message %s: %v", msg.UUID, err)
		}
	}
	t.Logf("error: %v", err)
}

// TestPublishTooLargeFailsOnlyThatCall sends a message above the broker's 5 MB limit.
func TestPublishTooLargeFailsOnlyThatCall(t *testing.T) {
	topic := testsupport.UniqueName("large")
	pub := newTestPublisher(t, nil)
	big := message.NewMessage(watermill.NewUUID(), bytes.Repeat([]byte("x"), 6<<20))
	err := publishWithin(t, 2*time.Minute, pub, topic, big)
	if err == nil || !strings.Contains(err.Error(), big.UUID) {
		t.Fatalf("publish of a 6 MB message: %v, want an error naming %s", err, big.UUID)
	}
	if !errors.Is(err, apulsar.ErrMessageTooLarge) {
		t.Errorf("error %v does not wrap pulsar.ErrMessageTooLarge", err)
	}
	if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("small"))); err != nil {
		t.Fatalf("publish after the failed one: %v", err)
	}
}

// TestPublishToMissingTenant: the broker refuses to create the producer.
func TestPublishToMissingTenant(t *testing.T) {
	pub := newTestPublisher(t, func(c *pulsar.PublisherConfig) { c.OperationTimeout = 10 * time.Second })
	topic := "persistent://" + testsupport.UniqueName("nosuchtenant") + "/ns/topic"
	err := publishWithin(t, 2*time.Minute, pub, topic, message.NewMessage(watermill.NewUUID(), []byte("x")))
	if err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("publish to a missing tenant: %v, want an error naming %s", err, topic)
	}
	t.Logf("error: %v", err)
}

// TestPublishRejectsBadInput: bad topic names fail before any network call, a nil message
// is refused.
func TestPublishRejectsBadInput(t *testing.T) {
	pub := newTestPublisher(t, nil)
	for _, topic := range []string{"", "a/b", "kafka://x/y/z", "with space"} {
		if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), nil)); err == nil {
			t.Errorf("Publish(%q) succeeded", topic)
		}
	}
	// The first message is sent (only the nil one and later key-less ones fail): use a
	// topic of this test, not a name another test could read.
	if err := pub.Publish(testsupport.UniqueName("badinput"), message.NewMessage(watermill.NewUUID(), nil), nil); err == nil ||
		!strings.Contains(err.Error(), "message 1 of 2 is nil") {
		t.Errorf("Publish with a nil message: %v", err)
	}
}

// TestConnect: Connect opens the topic's producer on a reachable broker, and reports an
// unreachable one (within OperationTimeout) instead of leaving it to the first Publish.
func TestConnect(t *testing.T) {
	pub := newTestPublisher(t, nil)
	if err := pub.Connect(testsupport.UniqueName("connect")); err != nil {
		t.Fatalf("connect to the real broker: %v", err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := listener.Addr().String()
	_ = listener.Close()
	unreachable, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: pulsar.Config{URL: "pulsar://" + closed,
		OperationTimeout: 2 * time.Second, ConnectionTimeout: time.Second}}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer unreachable.Close()
	if err := unreachable.Connect("anything"); err == nil {
		t.Fatal("Connect to a closed port succeeded")
	}
	_ = pub.Close()
	if err := pub.Connect("after-close"); !errors.Is(err, pulsar.ErrPublisherClosed) {
		t.Fatalf("Connect after Close: %v, want ErrPublisherClosed", err)
	}
}
