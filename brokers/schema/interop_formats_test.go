package schema

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// publishThrough publishes payloads (event types beside them, "" for none) under key K through
// the decorator into a new topic of the real Kafka whose subject has text of type typ registered,
// and returns the Kafka brokers, the topic and the messages.
func publishThrough(t *testing.T, typ sr.SchemaType, text string, payloads, eventTypes []string) ([]string, string, []*message.Message) {
	t.Helper()
	cl, _, _, _ := registry(t)
	return publishThroughWith(t, cl, func(subject string) { registerAs(t, cl, subject, typ, text) }, payloads, eventTypes)
}

// publishThroughWith is publishThrough with the topic's subject registered by register.
func publishThroughWith(t *testing.T, cl *sr.Client, register func(subject string), payloads, eventTypes []string) ([]string, string, []*message.Message) {
	t.Helper()
	topic := testsupport.UniqueName("interop")
	register(Subject(topic))
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	pub := newKafkaPublisher(t, brokers, cl, Config{})
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = orderMessage("K", i, p)
		if eventTypes[i] != "" {
			msgs[i].Metadata.Set(outbox.MetadataEventType, eventTypes[i])
		}
	}
	for i, err := range pub.(outcomePublisher).PublishEach(context.Background(), topic, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	return brokers, topic, msgs
}

func decodeNumbers(t *testing.T, text string) map[string]any {
	t.Helper()
	var v map[string]any
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPythonProtobufDeserializerReadsTheEvents: events the relay encoded with the registered
// .proto are read by confluent-kafka's ProtobufDeserializer in Python, with classes protoc
// (grpcio-tools) compiled from the schema text the registry returns for the record's id; the
// message indexes equal those confluent-kafka computes for the event type's message, and every
// field equals the event's payload in protobuf's canonical JSON (MessageToDict).
func TestPythonProtobufDeserializerReadsTheEvents(t *testing.T) {
	python := pythonEnv(t)
	payloads := []string{
		`{"id":"o-1","amount":"9007199254740993","qty":-3,"price":12.25,"paid":true,"status":"SHIPPED","note":"",
		  "tags":["a","b"],"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"attrs":{"w":"7","v":"-1"},"blob":"AAEC",
		  "placedAt":"2026-12-07T10:00:00Z","iban":"DE00","big":"18446744073709551615"}`,
		`{"orderId":"o-1","amount":"5","lines":[{"sku":"s"}]}`,
		`{"id":"o-3","amount":12,"status":1,"placed_at":"2026-12-07T10:00:00.5Z","card":"4111"}`,
	}
	eventTypes := []string{"", "outboxkit.test.Refund", "outboxkit.test.Order"}
	wants := []string{payloads[0], payloads[1],
		`{"id":"o-3","amount":"12","status":"SHIPPED","placedAt":"2026-12-07T10:00:00.500Z","card":"4111"}`}
	wantIndex := [][]int{{0}, {1}, {0}}
	brokers, topic, msgs := publishThrough(t, sr.TypeProtobuf, orderProto, payloads, eventTypes)

	records := readWithPython(t, python, "protobuf", brokers, topic, len(payloads))
	if len(records) != len(payloads) {
		t.Fatalf("python read %d records, want %d", len(records), len(payloads))
	}
	for i, r := range records {
		if r.Key != "K" || r.Headers["seq"] != msgs[i].Metadata.Get("seq") {
			t.Errorf("record %d: key %q headers %v", i, r.Key, r.Headers)
		}
		if !equalInts(r.Index, wantIndex[i]) {
			t.Errorf("record %d: message indexes %v, want %v", i, r.Index, wantIndex[i])
		}
		if want := decodeNumbers(t, wants[i]); !reflect.DeepEqual(normalize(r.Value), normalize(want)) {
			t.Errorf("record %d:\n python read %v\n want       %v", i, r.Value, want)
		}
	}
}

// TestPythonJSONDeserializerReadsTheEvents: events the relay validated against the registered
// JSON Schema are read by confluent-kafka's JSONDeserializer in Python, which fetches the schema
// by the record's id and validates each record with the jsonschema package; every field equals
// the payload (a 2^53+1 integer keeps its digits).
func TestPythonJSONDeserializerReadsTheEvents(t *testing.T) {
	python := pythonEnv(t)
	payloads := []string{
		`{"id":"o-1","amount":9007199254740993,"price":12.25,"status":"SHIPPED","note":"fragile \u00e9",
		  "items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"attrs":{"w":7}}`,
		`{"id":"o-2","amount":-4,"status":"NEW","note":null,"items":[]}`,
	}
	brokers, topic, msgs := publishThrough(t, sr.TypeJSON, orderJSONSchema, payloads, []string{"", ""})

	records := readWithPython(t, python, "json", brokers, topic, len(payloads))
	if len(records) != len(payloads) {
		t.Fatalf("python read %d records, want %d", len(records), len(payloads))
	}
	for i, r := range records {
		if r.Key != "K" || r.Headers["seq"] != msgs[i].Metadata.Get("seq") {
			t.Errorf("record %d: key %q headers %v", i, r.Key, r.Headers)
		}
		if want := decodeNumbers(t, payloads[i]); !reflect.DeepEqual(normalize(r.Value), normalize(want)) {
			t.Errorf("record %d:\n python read %v\n want       %v", i, r.Value, want)
		}
	}
}
