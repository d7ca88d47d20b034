package brokerconfig_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
	kafkasarama "github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	cesdk "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/outbox"
)

// ceSource is the ce_source of the relay tests.
const ceSource = "https://outboxkit.test/billing"

// ceEvents returns the events of the relay tests: three keys, two events each; one has a tenant,
// one has no content-type and a payload that is not JSON.
func ceEvents(t *testing.T, topic string) []outbox.Event {
	t.Helper()
	created := time.Now().UTC().Truncate(time.Millisecond)
	var events []outbox.Event
	for i := range 6 {
		e, err := outbox.NewJSONEvent(topic, "order", fmt.Sprintf("order-%d", i%3), []string{"OrderPlaced", "OrderPaid"}[i/3],
			map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = uuid.Must(uuid.NewV7())
		e.CreatedAt = created.Add(time.Duration(i) * time.Second)
		e.Headers["request_id"] = fmt.Sprintf("req-%d", i)
		switch i {
		case 1:
			e.TenantID = "acme"
		case 2:
			delete(e.Headers, "content-type")
			e.Payload = []byte("plain bytes")
		}
		events = append(events, e)
	}
	return events
}

// relay writes events to a fresh PostgreSQL outbox table in one transaction and runs a forwarder
// publishing through pub until the table is empty (every event acknowledged by the broker).
func relay(t *testing.T, ctx context.Context, pub message.Publisher, events []outbox.Event) {
	t.Helper()
	forwardertest.RelayPostgres(t, ctx, outbox.Config{Table: testsupport.UniqueName("ce_outbox")}, pub, "", events,
		"SELECT COUNT(*) FROM %s")
}

// Outbox events relayed by the forwarder through a brokerconfig publisher with format
// cloudevents to the real Kafka, read back by the CloudEvents Go SDK's Kafka (Sarama) binding
// and client: a real CloudEvents consumer, not outboxkit's.
func TestCloudEventsOnKafkaReadByTheSDK(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := testsupport.UniqueName("ce_kafka")
	_, b := buildYAML(t, ctx, fmt.Sprintf("broker: kafka\nformat: cloudevents\ncloudevents:\n  source: %s\nkafka:\n  brokers: [%q]\n",
		ceSource, brokers[0]))
	events := ceEvents(t, topic)
	relay(t, ctx, b.Publisher(), events)

	scfg := sarama.NewConfig()
	scfg.Version = sarama.V2_8_0_0 // Kafka 4 refuses the protocol versions below 2.1
	scfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	consumer, err := kafkasarama.NewConsumer(brokers, scfg, testsupport.UniqueName("ce_sdk"), topic)
	if err != nil {
		t.Fatalf("SDK consumer: %v", err)
	}
	defer consumer.Close(context.Background())
	client, err := cesdk.NewClient(consumer)
	if err != nil {
		t.Fatalf("SDK client: %v", err)
	}
	var mu sync.Mutex
	got := map[string]cesdk.Event{}
	all := make(chan struct{})
	recvCtx, stopRecv := context.WithCancel(ctx)
	recvDone := make(chan error, 1)
	go func() {
		recvDone <- client.StartReceiver(recvCtx, func(e cesdk.Event) {
			mu.Lock()
			defer mu.Unlock()
			if _, dup := got[e.ID()]; dup {
				return // at-least-once: a duplicate is allowed
			}
			got[e.ID()] = e
			if len(got) == len(events) {
				close(all)
			}
		})
	}()
	select {
	case <-all:
	case err := <-recvDone:
		t.Fatalf("the SDK receiver stopped: %v", err)
	case <-time.After(2 * time.Minute):
		mu.Lock()
		n := len(got)
		mu.Unlock()
		t.Fatalf("the SDK received %d of %d events in 2 minutes", n, len(events))
	}
	stopRecv()
	select {
	case err := <-recvDone:
		if err != nil {
			t.Errorf("StartReceiver: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Log("the SDK receiver did not stop within 30s after its context ended")
	}

	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		ev, ok := got[e.ID.String()]
		if !ok {
			t.Errorf("event %s not received", e.ID)
			continue
		}
		if err := ev.Validate(); err != nil {
			t.Errorf("event %s: not a valid CloudEvent: %v", e.ID, err)
		}
		wantType := e.Headers["content-type"]
		if ev.ID() != e.ID.String() || ev.Type() != e.EventType || ev.Source() != ceSource || ev.Subject() != e.AggregateID ||
			!ev.Time().Equal(e.CreatedAt) || ev.SpecVersion() != "1.0" || ev.DataContentType() != wantType ||
			string(ev.Data()) != string(e.Payload) {
			t.Errorf("event %s as the SDK reads it:\n%s\nwant type %s, subject %s, time %s, content type %q, data %s",
				e.ID, ev, e.EventType, e.AggregateID, e.CreatedAt.Format(time.RFC3339Nano), wantType, e.Payload)
		}
	}
}

// The same relay to the real Pulsar: there is no CloudEvents binding for Pulsar in the SDK, so
// the properties are read with pulsar-client-go and checked by hand, with the outbox fields.
func TestCloudEventsOnPulsarProperties(t *testing.T) {
	url := testsupport.PulsarURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := testsupport.UniqueName("ce_pulsar")
	cfg, b := buildYAML(t, ctx, fmt.Sprintf("broker: pulsar\nformat: cloudevents\ncloudevents:\n  source: %s\npulsar:\n  url: %q\n",
		ceSource, url))
	events := ceEvents(t, topic)
	relay(t, ctx, b.Publisher(), events)

	full, err := cfg.Pulsar.PublisherConfig().FullTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reader, err := client.CreateReader(apulsar.ReaderOptions{Topic: full, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	got := map[string]apulsar.Message{}
	for len(got) < len(events) {
		m, err := reader.Next(ctx)
		if err != nil {
			t.Fatalf("pulsar reader after %d of %d messages: %v", len(got), len(events), err)
		}
		got[m.Properties()["ce_id"]] = m
	}
	for _, e := range events {
		m, ok := got[e.ID.String()]
		if !ok {
			t.Errorf("event %s not received", e.ID)
			continue
		}
		props := m.Properties()
		want := map[string]string{
			"ce_id": e.ID.String(), "ce_type": e.EventType, "ce_source": ceSource, "ce_subject": e.AggregateID,
			"ce_time": e.CreatedAt.UTC().Format(time.RFC3339Nano), "ce_specversion": "1.0",
			outbox.MetadataEventID: e.ID.String(), outbox.MetadataEventType: e.EventType,
			outbox.MetadataAggregateType: e.AggregateType, outbox.MetadataAggregateID: e.AggregateID,
			"request_id": e.Headers["request_id"],
		}
		if ct, ok := e.Headers["content-type"]; ok {
			want["content-type"] = ct
		} else if v, ok := props["content-type"]; ok {
			t.Errorf("event %s: content-type %q without a content-type header", e.ID, v)
		}
		if e.TenantID != "" {
			want[outbox.MetadataTenantID] = e.TenantID
		}
		for k, v := range want {
			if props[k] != v {
				t.Errorf("event %s: property %s = %q, want %q", e.ID, k, props[k], v)
			}
		}
		if string(m.Payload()) != string(e.Payload) || m.Key() != e.AggregateID {
			t.Errorf("event %s: payload %q key %q, want %q %q", e.ID, m.Payload(), m.Key(), e.Payload, e.AggregateID)
		}
	}
}

// TestExactlyOnceAcceptsTheCloudEventsFormat: the CloudEvents decorator around a Kafka publisher
// keeps its transactions, so exactly-once delivery with format cloudevents is accepted (it ran
// on the real Kafka in kafka.TestExactlyOnceWithTracingAndCloudEvents). Before, forwarder.New
// refused it with an error naming the decorator's internal type.
func TestExactlyOnceAcceptsTheCloudEventsFormat(t *testing.T) {
	b := buildCloudEventsOnKFake(t)
	if _, ok := b.Publisher().(forwarder.TransactionalPublisher); !ok {
		t.Fatalf("the CloudEvents publisher %T has no transactions", b.Publisher())
	}
	if _, err := forwarder.New(forwarder.Config{DB: &sql.DB{}, Dialect: outbox.Postgres, Publisher: b.Publisher(),
		Delivery: forwarder.ExactlyOnce}); err != nil {
		t.Fatalf("forwarder.New with exactly-once and the CloudEvents publisher: %v", err)
	}
}
