package schema

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// newPulsarPublisher returns the decorator around brokers/pulsar's publisher on the test broker,
// with an encoder of cl.
func newPulsarPublisher(t *testing.T, cl *sr.Client) message.Publisher {
	t.Helper()
	ppub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: pulsar.Config{URL: testsupport.PulsarURL(t)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(ppub, enc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// pulsarOrder is orderSchema's record as a Go type, for pulsar-client-go's typed consumer.
type pulsarOrder struct {
	ID     string   `avro:"id"`
	Amount int64    `avro:"amount"`
	Qty    int32    `avro:"qty"`
	Price  float64  `avro:"price"`
	Paid   bool     `avro:"paid"`
	Status string   `avro:"status"`
	Note   *string  `avro:"note"`
	Tags   []string `avro:"tags"`
	Items  []struct {
		Sku string `avro:"sku"`
		Qty int32  `avro:"qty"`
	} `avro:"items"`
	Attrs map[string]int64 `avro:"attrs"`
}

// TestPublisherEncodesIntoPulsar: a batch through the decorator and brokers/pulsar into the real
// Pulsar, with the schema from the registry. Key P's second message does not fit: it fails
// permanently with its field path, P's later message is held (retriable), key Q is delivered
// whole. The topic's schema in Pulsar's own registry is the registry's Avro schema, every message
// is bare Avro (no Confluent header) stamped with that schema's version, and pulsar-client-go's
// typed Avro consumer reads every field, key and properties kept.
func TestPublisherEncodesIntoPulsar(t *testing.T) {
	cl, _, topic, id := registry(t)
	pub := newPulsarPublisher(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	q1 := `{"id":"q1","amount":9007199254740993,"qty":-3,"price":12.25,"paid":false,"status":"SHIPPED",
		"note":"fragile","tags":["a","b"],"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"attrs":{"w":7}}`
	msgs := []*message.Message{
		orderMessage("P", 0, validOrder("p0")),
		orderMessage("Q", 0, validOrder("q0")),
		orderMessage("P", 1, `{"id":"p1","amount":1,"qty":1,"price":1,"paid":"yes","status":"NEW","items":[]}`),
		orderMessage("Q", 1, q1),
		orderMessage("P", 2, validOrder("p2")),
	}
	errs := pub.(outcomePublisher).PublishEach(ctx, topic, msgs)
	checkPaidMismatchBatch(t, pub, errs)

	ss, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := pulsarTopicSchema(t, topic); got.Type != "AVRO" ||
		avro.MustParse(got.Data).Fingerprint() != avro.MustParse(ss.Schema).Fingerprint() {
		t.Errorf("the topic's schema in Pulsar is %s %s, want the registry's Avro schema %d", got.Type, got.Data, id)
	}

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: testsupport.PulsarURL(t), Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	typed, err := apulsar.NewAvroSchemaWithValidation(orderSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: "persistent://public/default/" + topic, SubscriptionName: "typed", Schema: typed,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	want := map[string]string{"P/0": validOrder("p0"), "Q/0": validOrder("q0"), "Q/1": q1}
	for range want {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		name := msg.Key() + "/" + msg.Properties()["seq"]
		payload, ok := want[name]
		if !ok || len(msg.SchemaVersion()) == 0 || msg.Payload()[0] == 0 {
			t.Fatalf("message %s (% x, schema version %x): not one of the sent ones, bare and stamped", name, msg.Payload(), msg.SchemaVersion())
		}
		delete(want, name)
		var got, expected pulsarOrder
		if err := msg.GetSchemaValue(&got); err != nil {
			t.Fatalf("message %s: typed read: %v", name, err)
		}
		if err := avro.Unmarshal(avro.MustParse(orderSchema), mustAvro(t, payload), &expected); err != nil {
			t.Fatal(err)
		}
		if name == "Q/1" && (got.Amount != 9007199254740993 || !reflect.DeepEqual(got.Tags, []string{"a", "b"}) ||
			got.Note == nil || *got.Note != "fragile" || len(got.Items) != 2 || got.Items[1].Sku != "y" || got.Attrs["w"] != 7) {
			t.Errorf("message Q/1: typed consumer read %+v", got)
		}
		if !reflect.DeepEqual(got, expected) {
			t.Errorf("message %s: typed consumer read %+v, want %+v", name, got, expected)
		}
		_ = consumer.Ack(msg)
	}
}

// mustAvro encodes an order's JSON with orderSchema, as the codec does.
func mustAvro(t *testing.T, payload string) []byte {
	t.Helper()
	c, err := newAvroCodec(orderSchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, body, m := c.encode([]byte(payload), "")
	if m != nil {
		t.Fatalf("%s: %v", payload, m)
	}
	return body
}

// TestPublisherOnPulsarRefusesWhatPulsarCannotCarry: on a broker with its own registry, a subject
// whose schema is not Avro fails retriably (a *RegistryError naming the type: the configuration
// is to fix), and an event its writer framed in the Confluent wire format fails permanently.
func TestPublisherOnPulsarRefusesWhatPulsarCannotCarry(t *testing.T) {
	cl, _, topic, _ := registry(t)
	pub := newPulsarPublisher(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jsonTopic := testsupport.UniqueName("json")
	if _, err := cl.CreateSchema(ctx, Subject(jsonTopic), sr.Schema{Type: sr.TypeJSON, Schema: orderJSONSchema}); err != nil {
		t.Fatal(err)
	}
	errs := pub.(outcomePublisher).PublishEach(ctx, jsonTopic, []*message.Message{orderMessage("A", 0, validOrder("a"))})
	var regErr *RegistryError
	if !errors.As(errs[0], &regErr) || !pub.(errorClassifier).Retriable(errs[0]) {
		t.Errorf("JSON Schema subject on Pulsar: %v, want a retriable *RegistryError", errs[0])
	}

	framed := orderMessage("B", 0, "\x00\x00\x00\x00\x01body")
	framed.Metadata.Set(MetadataEncoded, EncodedConfluent)
	errs = pub.(outcomePublisher).PublishEach(ctx, topic, []*message.Message{framed})
	var mismatch *MismatchError
	if !errors.As(errs[0], &mismatch) || pub.(errorClassifier).Retriable(errs[0]) {
		t.Errorf("Confluent-framed event on Pulsar: %v, want a permanent *MismatchError", errs[0])
	}
}

// pulsarSchema is the Pulsar admin API's answer for a topic's schema.
type pulsarSchema struct {
	Version int64  `json:"version"`
	Type    string `json:"type"`
	Data    string `json:"data"`
}

// pulsarTopicSchema returns the latest schema of topic (in public/default) in Pulsar's registry.
func pulsarTopicSchema(t *testing.T, topic string) pulsarSchema {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(testsupport.PulsarHTTPURL() + "/admin/v2/schemas/public/default/" + topic + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var info pulsarSchema
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("topic %s schema: %s %s", topic, resp.Status, body)
	}
	return info
}
