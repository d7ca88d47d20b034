package pulsar_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/hamba/avro/v2"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/brokers/schema/nativeschema"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

const (
	countedV1 = `{"type":"record","name":"Counted","namespace":"outboxkit.test","fields":[{"name":"n","type":"long"}]}`
	// countedOther has a field without a default that countedV1 lacks: incompatible under the
	// broker's default strategy, so the broker refuses it once countedV1 is registered.
	countedOther = `{"type":"record","name":"Counted","namespace":"outboxkit.test","fields":[{"name":"m","type":"string"}]}`
)

// PublishEachWithSchema sends bare Avro with the schema: the topic's schema in the broker's own
// registry is then that Avro schema, every message carries its version, and a consumer with a
// typed Avro schema (pulsar-client-go's own, not ours) reads the values back. A second schema the
// broker refuses fails its message with the retriable ErrSchemaRefused and holds the rest of its
// key, while another key's message goes through.
func TestPublishEachWithSchemaRegistersTheTopicSchema(t *testing.T) {
	url := testsupport.PulsarURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("avro")
	fullTopic := "persistent://public/default/" + topic
	pub := newTestPublisher(t, nil)

	parsed := avro.MustParse(countedV1)
	v1 := &nativeschema.Schema{Type: nativeschema.Avro, Definition: countedV1, ID: 1}
	var msgs []*message.Message
	for i, n := range []int64{1, 9007199254740993} {
		body, err := avro.Marshal(parsed, map[string]any{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, message.NewMessage(watermill.NewUUID(), body))
		msgs[i].Metadata.Set("aggregate_id", "k")
	}
	for i, err := range pub.PublishEachWithSchema(ctx, topic, msgs, []*nativeschema.Schema{v1, v1}) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}

	info := topicSchema(t, topic)
	registered, err := avro.Parse(info.Data) // the broker stores it in Avro's own normal form
	if err != nil || info.Type != "AVRO" || registered.Fingerprint() != parsed.Fingerprint() {
		t.Fatalf("topic schema %s %s, want AVRO %s", info.Type, info.Data, countedV1)
	}

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: fullTopic, SubscriptionName: "typed", Schema: apulsar.NewAvroSchema(countedV1, nil),
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for _, want := range []int64{1, 9007199254740993} {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			N int64 `avro:"n" json:"n"`
		}
		if err := msg.GetSchemaValue(&got); err != nil || got.N != want {
			t.Fatalf("typed consumer read %+v (%v), want n=%d", got, err, want)
		}
		if len(msg.SchemaVersion()) == 0 {
			t.Fatalf("message %v carries no schema version", msg.ID())
		}
		_ = consumer.Ack(msg)
	}

	refused := []*message.Message{
		message.NewMessage(watermill.NewUUID(), []byte{2, 'x'}),
		message.NewMessage(watermill.NewUUID(), []byte{2, 'y'}),
		message.NewMessage(watermill.NewUUID(), []byte{4}),
	}
	refused[0].Metadata.Set("aggregate_id", "k")
	refused[1].Metadata.Set("aggregate_id", "k")
	refused[2].Metadata.Set("aggregate_id", "other")
	other := &nativeschema.Schema{Type: nativeschema.Avro, Definition: countedOther, ID: 2}
	errs := pub.PublishEachWithSchema(ctx, topic, refused, []*nativeschema.Schema{other, other, v1})
	if !errors.Is(errs[0], pulsar.ErrSchemaRefused) || !pulsar.Retriable(errs[0]) {
		t.Errorf("message with a refused schema: %v (retriable %v), want ErrSchemaRefused, retriable", errs[0], pulsar.Retriable(errs[0]))
	}
	if !errors.Is(errs[1], pulsar.ErrEarlierMessageFailed) {
		t.Errorf("later message of the key: %v, want ErrEarlierMessageFailed", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("other key's message: %v, want sent", errs[2])
	}
	if errs := pub.PublishEachWithSchema(ctx, topic, refused[:1], nil); !errors.Is(errs[0], apulsar.ErrInvalidMessage) {
		t.Errorf("no schemas for one message: %v, want ErrInvalidMessage", errs[0])
	}

	// A schema the client cannot use (a type Pulsar's registry is not sent) fails its message
	// before anything is sent, retriably, and holds the rest of its key; the other key goes.
	unusable := &nativeschema.Schema{Type: "PROTOBUF", Definition: `syntax = "proto3";`, ID: 3}
	errs = pub.PublishEachWithSchema(ctx, topic, refused, []*nativeschema.Schema{unusable, v1, v1})
	if !errors.Is(errs[0], pulsar.ErrSchemaRefused) || !pulsar.Retriable(errs[0]) || !strings.Contains(errs[0].Error(), `"PROTOBUF"`) {
		t.Errorf("message with an unusable schema: %v (retriable %v), want ErrSchemaRefused naming PROTOBUF, retriable", errs[0], pulsar.Retriable(errs[0]))
	}
	if !errors.Is(errs[1], pulsar.ErrEarlierMessageFailed) {
		t.Errorf("later message of the key: %v, want ErrEarlierMessageFailed", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("other key's message: %v, want sent", errs[2])
	}
}

// schemaInfo is the Pulsar admin API's answer for a topic's schema.
type schemaInfo struct {
	Version int64  `json:"version"`
	Type    string `json:"type"`
	Data    string `json:"data"`
}

// topicSchema returns the latest schema of topic (in public/default) from the broker's registry.
func topicSchema(t *testing.T, topic string) schemaInfo {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(testsupport.PulsarHTTPURL() + "/admin/v2/schemas/public/default/" + topic + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var info schemaInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("topic %s schema: %s %s", topic, resp.Status, body)
	}
	return info
}
