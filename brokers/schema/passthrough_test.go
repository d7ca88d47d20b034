package schema

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestPublisherPassesPreEncodedEventsThrough: an event whose writer encoded it (header
// schema_encoded: confluent) reaches Kafka byte for byte, with no registry lookup (the registry
// here does not answer); one that says so without the Confluent framing, or names another
// encoding, fails permanently, alone.
func TestPublisherPassesPreEncodedEventsThrough(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("preencoded")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	down := unreachableRegistry(t)
	pub := newKafkaPublisher(t, brokers, down, Config{})
	framed := []byte{0, 0, 0, 0, 42, 0x0e, 0xff}
	encoded := func(key, value string, payload []byte) *message.Message {
		msg := orderMessage(key, 0, "")
		msg.Payload = payload
		msg.Metadata.Set(MetadataEncoded, value)
		return msg
	}
	msgs := []*message.Message{
		encoded("A", EncodedConfluent, framed),
		encoded("B", EncodedConfluent, []byte(`{"n":1}`)),
		encoded("C", "avro", framed),
	}
	errs := pub.(outcomePublisher).PublishEach(context.Background(), topic, msgs)
	var m1, m2 *MismatchError
	if errs[0] != nil || !errors.As(errs[1], &m1) || !errors.As(errs[2], &m2) ||
		pub.(errorClassifier).Retriable(errs[1]) || pub.(errorClassifier).Retriable(errs[2]) {
		t.Fatalf("outcomes %v, want nil and two permanent mismatches", errs)
	}
	if m1.Reason != "header schema_encoded says confluent, but the payload does not start with the Confluent wire format's magic byte 0 and a 4-byte schema id" ||
		m2.Reason != `header schema_encoded is "avro"; the one encoding the relay passes through is "confluent"` {
		t.Errorf("reasons %q, %q", m1.Reason, m2.Reason)
	}
	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	if len(records) != 1 || !bytes.Equal(records[0].Value, framed) {
		t.Fatalf("records %v, want the one pre-encoded payload byte for byte", records)
	}
}
