package brokerconfig_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// The same schema_registry section as on Kafka, with broker: pulsar: the forwarder relays outbox
// events into the real Pulsar as bare Avro with the registry's schema, which a consumer with a
// typed Avro schema reads (the broker checks its schema against the one the relay registered),
// and the poison event goes to the dead-letter topic at once, as its JSON, with the field path
// and the reason in its poison property.
func TestRelayWithSchemaRegistryOnPulsar(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	url := testsupport.PulsarURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic, dlq := testsupport.UniqueName("schema_relay"), testsupport.UniqueName("schema_dlq")
	const counted = `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(ctx, schema.Subject(topic), sr.Schema{Type: sr.TypeAvro, Schema: counted}); err != nil {
		t.Fatal(err)
	}
	_, b := buildYAML(t, ctx, fmt.Sprintf("broker: pulsar\npulsar:\n  url: %s\nschema_registry:\n  url: %s\n", url, registryURL))
	defer relayCountedEvents(ctx, t, b.Publisher(), topic, dlq)()

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	typed, err := subscribeTyped(ctx, client, apulsar.ConsumerOptions{
		Topic: "persistent://public/default/" + topic, SubscriptionName: "typed",
		Schema: apulsar.NewAvroSchema(counted, nil), SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatalf("typed Avro consumer: %v", err)
	}
	defer typed.Close()
	got := map[string]int64{}
	for len(got) < 2 {
		msg, err := typed.Receive(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		var v struct {
			N int64 `avro:"n"`
		}
		if err := msg.GetSchemaValue(&v); err != nil || len(msg.SchemaVersion()) == 0 {
			t.Fatalf("message %s (% x): %v, schema version %x", msg.Key(), msg.Payload(), err, msg.SchemaVersion())
		}
		got[msg.Key()] = v.N
		_ = typed.Ack(msg)
	}
	if got["k-0"] != 1 || got["k-1"] != 2 {
		t.Errorf("typed consumer read %v, want k-0: 1, k-1: 2", got)
	}

	reader, err := client.CreateReader(apulsar.ReaderOptions{Topic: "persistent://public/default/" + dlq, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	dead, err := reader.Next(ctx)
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	reason := dead.Properties()[middleware.ReasonForPoisonedKey]
	if !strings.Contains(reason, "at $.n: want an integer, got a string") || string(dead.Payload()) != `{"n":"three"}` {
		t.Fatalf("dead letter %q with reason %q, want the JSON payload and the path $.n", dead.Payload(), reason)
	}
}

// subscribeTyped subscribes a consumer with a schema, waiting while the topic is still without
// one: the relay's producer carries its schema on each message (PublishEachWithSchema), so the
// broker registers the Avro schema at the first send, and until then a typed consumer of the
// active topic is refused ("Failed to add schema to an active topic with empty(BYTES) schema").
// It waits for that send, not for a time: any other error, or the context's end, is returned.
func subscribeTyped(ctx context.Context, client apulsar.Client, opts apulsar.ConsumerOptions) (apulsar.Consumer, error) {
	for {
		c, err := client.Subscribe(opts)
		if err == nil || !strings.Contains(err.Error(), "empty(BYTES) schema") {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the topic has no schema yet: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
