package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestRabbitMQConsumerSubscribingLate publishes the script before the example's consumer
// subscribes, as happens when the forwarder relays the first events before the router has
// started. On RabbitMQ the consumer reads the queues of its own consumer group, so the example
// must make the publisher declare those queues (not the configuration file's group's): events
// routed before the consumer's queues exist are lost to it, and the order check then reports a
// later event of a key as arriving before an earlier one.
func TestRabbitMQConsumerSubscribingLate(t *testing.T) {
	env := map[string]string{"OUTBOXKIT_RABBITMQ_AMQP_URL": testsupport.RabbitMQURL(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := loadConfig(options{ConfigPath: "rabbitmq.yaml",
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	topic, group := names(&cfg, true)
	brokers, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer brokers.Close()

	got := make(chan received, 4*len(script))
	identity := func(_ context.Context, p []byte) ([]byte, error) { return p, nil }
	router, err := newConsumer(brokers, topic, group, identity, got)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	// Both accounts' #1 and #2 before the consumer subscribed, their #3 after.
	publishScript(t, brokers, topic, script[:4], written)
	routerDone := make(chan error, 1)
	go func() { routerDone <- router.Run(ctx) }()
	defer func() {
		cancel()
		<-routerDone
	}()
	select {
	case <-router.Running():
	case <-ctx.Done():
		t.Fatalf("router not running: %v", ctx.Err())
	}
	publishScript(t, brokers, topic, script[4:], written)

	var out bytes.Buffer
	_, err = consumeInOrder(ctx, &out, got, written)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("consumer %q, subscribed after #1 and #2 of each account were published to %s: %v", group, topic, err)
	}
}

// publishScript publishes steps to topic as the forwarder would (the event's id, type and
// aggregate id as metadata, the change as JSON) and adds their ids to written.
func publishScript(t *testing.T, brokers *brokerconfig.Brokers, topic string, steps []struct {
	eventType string
	change    change
}, written map[string]bool) {
	t.Helper()
	for _, s := range steps {
		payload, err := json.Marshal(s.change)
		if err != nil {
			t.Fatal(err)
		}
		msg := message.NewMessage(watermill.NewUUID(), payload)
		msg.Metadata.Set(outbox.MetadataEventID, msg.UUID)
		msg.Metadata.Set(outbox.MetadataEventType, s.eventType)
		msg.Metadata.Set(outbox.MetadataAggregateID, s.change.Account)
		if err := brokers.Publisher().Publish(topic, msg); err != nil {
			t.Fatalf("publish %s of %s: %v", s.eventType, s.change.Account, err)
		}
		written[msg.UUID] = true
	}
}
