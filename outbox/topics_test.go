package outbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// With Config.Topics = KafkaTopics, the writer refuses at write time (before any SQL) the topics
// ValidateTopic allows but Kafka refuses; without it they pass, as before.
func TestWriterChecksTheBrokersTopicRule(t *testing.T) {
	kafkaWriter, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Topics: outbox.KafkaTopics})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres})
	if err != nil {
		t.Fatal(err)
	}
	event := func(topic string) outbox.Event {
		return outbox.Event{Topic: topic, AggregateType: "order", AggregateID: "o-1", EventType: "Placed", Payload: []byte("{}")}
	}
	for _, topic := range []string{"orders:v1", "orders$", strings.Repeat("t", 250)} {
		err := kafkaWriter.WriteTx(context.Background(), nil, event(topic))
		if err == nil || !strings.Contains(err.Error(), "Kafka") {
			t.Errorf("topic %q with KafkaTopics: %v, want a refusal naming Kafka", topic, err)
		}
		if err := outbox.KafkaTopics.CheckTopic(topic); err == nil {
			t.Errorf("KafkaTopics.CheckTopic(%q) accepted it", topic)
		}
		if err := outbox.ValidateTopic(topic); err != nil && len(topic) <= 255 {
			t.Errorf("ValidateTopic(%q): %v (it allows : and $)", topic, err)
		}
	}
	for _, topic := range []string{"orders.v1", "a-b_c", strings.Repeat("t", 249)} {
		if err := outbox.KafkaTopics.CheckTopic(topic); err != nil {
			t.Errorf("KafkaTopics.CheckTopic(%q): %v", topic, err)
		}
	}
	// Without a rule, validation passes and the writer refuses the nil transaction (no panic).
	if err := plain.WriteTx(context.Background(), nil, event("orders:v1")); err == nil || !strings.Contains(err.Error(), "transaction is nil") {
		t.Errorf("a writer without a topic rule, nil transaction: %v, want the nil transaction refused", err)
	}
}
