package cloudevents_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestOutcomeConformance runs forwarder/outcometest against the CloudEvents decorator around
// brokers/kafka's Publisher on the real Kafka: the decorator must keep the per-message
// outcomes, the gaplessness and the classifier of the publisher it wraps. Every record read
// back must also be a CloudEvent whose ce_id is the message's event id.
func TestOutcomeConformance(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	newPublisher := func(t *testing.T) outcometest.Publisher {
		inner, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
		if err != nil {
			t.Fatalf("new kafka publisher: %v", err)
		}
		pub, err := cloudevents.NewPublisher(inner, cloudevents.Config{Source: "/outcometest"})
		if err != nil {
			_ = inner.Close()
			t.Fatalf("new cloudevents publisher: %v", err)
		}
		each, ok := pub.(outcometest.Publisher)
		if !ok {
			_ = pub.Close()
			t.Fatalf("the decorator %T of a publisher with PublishEach has no PublishEach", pub)
		}
		return each
	}
	broker := outcometest.Broker{
		NewTopic: func(t *testing.T) string {
			topic := testsupport.UniqueName("outcometest")
			testsupport.CreateKafkaTopic(t, brokers, topic)
			return topic
		},
		ReadTopic: func(t *testing.T, topic string) []outcometest.Received { return readCloudEvents(t, brokers, topic) },
	}
	features := outcometest.Features{OversizedPayload: kafka.DefaultMessageMaxBytes + 1, Refusals: []outcometest.Refusal{{
		// A message without an event type cannot be a CloudEvent (ErrNotAnEvent).
		Name:  "NotAnEvent",
		Spoil: func(msg *message.Message) { delete(msg.Metadata, outbox.MetadataEventType) },
	}}}
	outcometest.TestOutcomePublisher(t, features, newPublisher, broker)
}

// readCloudEvents reads topic back and checks that every record is a CloudEvent whose ce_id is
// its message UUID (the suite's events have their id as UUID).
func readCloudEvents(t *testing.T, brokers []string, topic string) []outcometest.Received {
	t.Helper()
	var got []outcometest.Received
	for _, r := range testsupport.ReadKafkaTopic(t, brokers, topic) {
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		id := headers["_watermill_message_uuid"]
		if headers[cloudevents.AttrSpecVersion] != cloudevents.SpecVersion || headers[cloudevents.AttrID] != id {
			t.Errorf("record %s at offset %d is not a CloudEvent with ce_id %s: headers %v", id, r.Offset, id, headers)
		}
		got = append(got, outcometest.Received{UUID: id, Key: string(r.Key)})
	}
	return got
}
