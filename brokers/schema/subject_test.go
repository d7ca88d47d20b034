package schema

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

const (
	placedSchema   = `{"type":"record","name":"Placed","fields":[{"name":"n","type":"long"}]}`
	refundedSchema = `{"type":"record","name":"Refunded","fields":[{"name":"why","type":"string"}]}`
)

// TestSubjectStrategiesNameTheSubject: the record strategy's subject is the event type, the
// topic_record strategy's <topic>-<event type>; each encodes with the schema registered there.
func TestSubjectStrategiesNameTheSubject(t *testing.T) {
	cl, _, topic, _ := registry(t)
	eventType := testsupport.UniqueName("outboxkit.test.Placed")
	for strategy, subject := range map[Strategy]string{
		StrategyRecord:      eventType,
		StrategyTopicRecord: topic + "-" + eventType,
	} {
		id := registerAs(t, cl, subject, sr.TypeAvro, placedSchema)
		enc, err := NewEncoder(cl, Config{Strategy: strategy})
		if err != nil {
			t.Fatal(err)
		}
		out, err := enc.EncodeEvent(context.Background(), topic, eventType, []byte(`{"n":7}`))
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
		var header sr.ConfluentHeader
		if got, body, err := header.DecodeID(out); err != nil || got != id || string(body) != "\x0e" {
			t.Errorf("%s: id %d body % x err %v, want the id %d of subject %s and the long 7", strategy, got, body, err, id, subject)
		}
		_, err = enc.EncodeEvent(context.Background(), topic, "", []byte(`{"n":7}`))
		var mismatch *MismatchError
		if !errors.As(err, &mismatch) || Retriable(err) ||
			mismatch.Reason != "the event has no event_type metadata, which the "+string(strategy)+" subject name strategy needs" {
			t.Errorf("%s, no event type: %v, want a permanent mismatch naming event_type", strategy, err)
		}
	}
	if err := (Config{Strategy: "record_name"}).Validate(); err == nil ||
		err.Error() != `schema: subject strategy "record_name": want topic, record or topic_record` {
		t.Errorf("unknown strategy: %v", err)
	}
}

// TestPublisherRecordStrategyEncodesEachEventType: with the record strategy one topic carries
// two event types, each encoded with its own subject's schema; an event without a type fails
// alone, permanently, and its key's later event is held.
func TestPublisherRecordStrategyEncodesEachEventType(t *testing.T) {
	cl, _, topic, _ := registry(t)
	placed, refunded := testsupport.UniqueName("shop.Placed"), testsupport.UniqueName("shop.Refunded")
	placedID := registerAs(t, cl, placed, sr.TypeAvro, placedSchema)
	refundedID := registerAs(t, cl, refunded, sr.TypeAvro, refundedSchema)
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	pub := newKafkaPublisher(t, brokers, cl, Config{Strategy: StrategyRecord})
	typed := func(key string, seq int, eventType, payload string) *message.Message {
		msg := orderMessage(key, seq, payload)
		if eventType != "" {
			msg.Metadata.Set(outbox.MetadataEventType, eventType)
		}
		return msg
	}
	msgs := []*message.Message{
		typed("A", 0, placed, `{"n":1}`),
		typed("A", 1, refunded, `{"why":"late"}`),
		typed("B", 0, "", `{"n":2}`),
		typed("B", 1, placed, `{"n":3}`),
	}
	errs := pub.(outcomePublisher).PublishEach(context.Background(), topic, msgs)
	var mismatch *MismatchError
	if errs[0] != nil || errs[1] != nil || !errors.As(errs[2], &mismatch) || !errors.Is(errs[3], ErrEarlierMessageNotEncoded) {
		t.Fatalf("outcomes %v, want nil, nil, a mismatch (no event_type), held", errs)
	}
	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	if len(records) != 2 {
		t.Fatalf("%d records, want 2", len(records))
	}
	for i, want := range []int{placedID, refundedID} {
		var header sr.ConfluentHeader
		if id, _, err := header.DecodeID(records[i].Value); err != nil || id != want {
			t.Errorf("record %d: id %d err %v, want %d", i, id, err, want)
		}
	}
}

// TestTopicConfigOverridesTheDefault: a topic entry names its subject outright (with a fixed
// version) or by another strategy; other topics keep the default strategy and the latest version.
func TestTopicConfigOverridesTheDefault(t *testing.T) {
	cl, _, topic, defaultID := registry(t)
	shared := testsupport.UniqueName("shop.Order")
	v1 := registerAs(t, cl, shared, sr.TypeAvro, placedSchema)
	registerAs(t, cl, shared, sr.TypeAvro, `{"type":"record","name":"Placed","fields":[{"name":"n","type":"long"},{"name":"m","type":"long","default":0}]}`)
	eventType := testsupport.UniqueName("shop.Refunded")
	recordID := registerAs(t, cl, eventType, sr.TypeAvro, refundedSchema)
	enc, err := NewEncoder(cl, Config{Topics: map[string]TopicConfig{
		"fixed":    {Subject: shared, Version: 1},
		"byrecord": {Strategy: StrategyRecord},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic, eventType, payload string
		id                        int
	}{
		{"fixed", "", `{"n":1}`, v1},
		{"byrecord", eventType, `{"why":"late"}`, recordID},
		{topic, eventType, validOrder("o"), defaultID},
	} {
		out, err := enc.EncodeEvent(context.Background(), tc.topic, tc.eventType, []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.topic, err)
		}
		var header sr.ConfluentHeader
		if id, _, err := header.DecodeID(out); err != nil || id != tc.id {
			t.Errorf("%s: schema id %d err %v, want %d", tc.topic, id, err, tc.id)
		}
	}
}
