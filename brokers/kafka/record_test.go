package kafka

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/IBM/sarama"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecordIsWhatTheMarshalerMarshals builds records directly (Publisher.record) and checks
// them against watermill-kafka's marshaler of NewMarshaler, which the subscriber unmarshals
// with: the same key, value and headers (in any order), and the message read back whole.
func TestRecordIsWhatTheMarshalerMarshals(t *testing.T) {
	p := &Publisher{config: Config{KeyMetadata: "outboxkit_aggregate_id", MessageMaxBytes: 1 << 20}}
	keyed := message.NewMessage("9f0c2d0e-1", []byte(`{"total":42}`))
	keyed.Metadata.Set("outboxkit_aggregate_id", "order-7")
	keyed.Metadata.Set("trace", "abc")
	for _, msg := range []*message.Message{keyed, message.NewMessage("9f0c2d0e-2", nil), message.NewMessage("9f0c2d0e-3", []byte{})} {
		rec, err := p.record("orders", msg)
		if err != nil {
			t.Fatal(err)
		}
		km, err := NewMarshaler(p.config.KeyMetadata).Marshal("orders", msg)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := km.Key.Encode()
		value, _ := km.Value.Encode()
		if rec.Topic != "orders" || rec.Key == nil || string(rec.Key) != string(key) || string(rec.Value) != string(value) ||
			(rec.Value == nil) != (value == nil) {
			t.Errorf("message %s: record key %q value %q, marshaler key %q value %q", msg.UUID, rec.Key, rec.Value, key, value)
		}
		var got, want []string
		for _, h := range rec.Headers {
			got = append(got, h.Key+"="+string(h.Value))
		}
		for _, h := range km.Headers {
			want = append(want, string(h.Key)+"="+string(h.Value))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("message %s: headers %v, the marshaler's %v", msg.UUID, got, want)
		}
		back, err := NewMarshaler(p.config.KeyMetadata).Unmarshal(saramaMessageOf(rec))
		if err != nil || back.UUID != msg.UUID || !maps.Equal(back.Metadata, msg.Metadata) || string(back.Payload) != string(msg.Payload) {
			t.Errorf("message %s read back as %+v (%v)", msg.UUID, back, err)
		}
	}
	for _, value := range []string{"forged", ""} {
		forged := message.NewMessage("9f0c2d0e-4", nil)
		forged.Metadata.Set(wkafka.UUIDHeaderKey, value)
		if _, err := p.record("orders", forged); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("a message with the reserved UUID header %q: %v, want ErrInvalidMessage", value, err)
		}
	}
}

// saramaMessageOf is the Sarama consumer message of rec, as the subscriber receives it.
func saramaMessageOf(rec *kgo.Record) *sarama.ConsumerMessage {
	m := &sarama.ConsumerMessage{Topic: rec.Topic, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	return m
}
