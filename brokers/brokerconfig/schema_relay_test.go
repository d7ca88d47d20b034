package brokerconfig_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/outbox"
)

// The forwarder relays outbox events through a brokerconfig publisher with a schema_registry
// section into the real Kafka: the events that fit arrive Confluent-framed, the poison event (a
// string where the schema has a long) goes to the dead-letter topic at once, as its JSON, with
// the field path and the reason in its poison header.
func TestRelayWithSchemaRegistryDeadLettersThePoisonEvent(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic, dlq := testsupport.UniqueName("schema_relay"), testsupport.UniqueName("schema_dlq")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	testsupport.CreateKafkaTopic(t, brokers, dlq)
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, schema.Subject(topic), sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n",
		strings.Join(brokers, ", "), registryURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	defer relayCountedEvents(ctx, t, b.Publisher(), topic, dlq)()

	delivered := consumeN(ctx, t, brokers, topic, 2)
	var header sr.ConfluentHeader
	for _, r := range delivered {
		if id, _, err := header.DecodeID(r.Value); err != nil || id != ss.ID {
			t.Errorf("record %s: % x is not framed with schema id %d (%v)", r.Key, r.Value, ss.ID, err)
		}
	}
	dead := consumeN(ctx, t, brokers, dlq, 1)[0]
	var reason string
	for _, h := range dead.Headers {
		if h.Key == middleware.ReasonForPoisonedKey {
			reason = string(h.Value)
		}
	}
	if !strings.Contains(reason, "at $.n: want an integer, got a string") || string(dead.Value) != `{"n":"three"}` {
		t.Fatalf("dead letter %q with reason %q, want the JSON payload and the path $.n", dead.Value, reason)
	}
}

// consumeN reads topic from the start until n records arrived.
func consumeN(ctx context.Context, t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records in %s before the deadline", len(got), n, topic)
		}
		got = append(got, fetches.Records()...)
	}
	return got
}

// relayCountedEvents writes three events to a new PostgreSQL outbox, n = 1 and 2 (keys k-0 and
// k-1) and the poison n = "three" (k-0, a string where the schemas have a long), and runs a
// forwarder that relays them through pub, dead letters to dlq. The returned function stops it.
func relayCountedEvents(ctx context.Context, t *testing.T, pub message.Publisher, topic, dlq string) func() {
	t.Helper()
	var events []outbox.Event
	for i, n := range []any{1, 2, "three"} { // the poison event last of its key
		e, err := outbox.NewJSONEvent(topic, "counter", fmt.Sprintf("k-%d", i%2), "Counted", map[string]any{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = uuid.Must(uuid.NewV7())
		events = append(events, e)
	}
	db := testsupport.OpenPostgres(t)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("schema_outbox")})
	if err := testsupport.WriteEvents(ctx, db, w, events...); err != nil {
		t.Fatal(err)
	}
	return forwardertest.Start(t, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: w.Table().Events(), Publisher: pub, DeadLetterTopic: dlq,
		MaxPollInterval: 200 * time.Millisecond, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second,
		Logger: forwardertest.QuietLogger(),
	})
}
