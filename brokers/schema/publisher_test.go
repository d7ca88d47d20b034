package schema

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

func orderMessage(key string, seq int, payload string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(payload))
	msg.Metadata.Set(outbox.MetadataAggregateID, key)
	msg.Metadata.Set("seq", fmt.Sprint(seq))
	return msg
}

func validOrder(id string) string {
	return `{"id":"` + id + `","amount":1,"qty":1,"price":1,"paid":true,"status":"NEW","items":[]}`
}

// TestPublisherEncodesIntoKafka: a batch through the decorator and brokers/kafka into the real
// Kafka. Key P's second message does not fit: it fails permanently with its field path, P's later
// messages fail retriably without being sent (gapless), key Q is delivered whole; every record in
// the topic is Confluent-framed Avro that decodes with the registry's schema, metadata kept.
func TestPublisherEncodesIntoKafka(t *testing.T) {
	cl, _, topic, id := registry(t)
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	pub := newKafkaPublisher(t, brokers, cl, Config{})

	msgs := []*message.Message{
		orderMessage("P", 0, validOrder("p0")),
		orderMessage("Q", 0, validOrder("q0")),
		orderMessage("P", 1, `{"id":"p1","amount":1,"qty":1,"price":1,"paid":"yes","status":"NEW","items":[]}`),
		orderMessage("Q", 1, validOrder("q1")),
		orderMessage("P", 2, validOrder("p2")),
	}
	errs := pub.(outcomePublisher).PublishEach(context.Background(), topic, msgs)
	checkPaidMismatchBatch(t, pub, errs)

	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	ss, err := cl.SchemaByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	parsed := avro.MustParse(ss.Schema)
	var got []string
	for _, r := range records {
		var header sr.ConfluentHeader
		gotID, body, err := header.DecodeID(r.Value)
		if err != nil || gotID != id {
			t.Fatalf("record %s: id %d err %v, want id %d", r.Key, gotID, err, id)
		}
		var order map[string]any
		if err := avro.Unmarshal(parsed, body, &order); err != nil {
			t.Fatalf("record %s: %v", r.Key, err)
		}
		var seq string
		for _, h := range r.Headers {
			if h.Key == "seq" {
				seq = string(h.Value)
			}
		}
		got = append(got, fmt.Sprintf("%s/%s/%v", r.Key, seq, order["id"]))
	}
	want := map[string]bool{"P/0/p0": true, "Q/0/q0": true, "Q/1/q1": true}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected record %s (records %v)", g, got)
		}
	}
}

// TestPublisherRegistryDownFailsTheCallRetriably: with the registry unreachable no message is
// sent and every one fails retriably.
func TestPublisherRegistryDownFailsTheCallRetriably(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	down := unreachableRegistry(t)
	pub := newKafkaPublisher(t, brokers, down, Config{})
	topic := testsupport.UniqueName("orders")
	errs := pub.(outcomePublisher).PublishEach(context.Background(), topic,
		[]*message.Message{orderMessage("A", 0, validOrder("a")), orderMessage("B", 0, validOrder("b"))})
	for i, err := range errs {
		var regErr *RegistryError
		if !errors.As(err, &regErr) || !pub.(errorClassifier).Retriable(err) {
			t.Errorf("message %d: %v, want a retriable *RegistryError", i, err)
		}
	}
}
