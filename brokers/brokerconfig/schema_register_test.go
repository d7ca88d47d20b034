package brokerconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// With schema_registry.register and a schema file for a topic's subject, the relay registers the
// subject the registry does not have and publishes the event framed with its id (the real
// registry and Kafka); the topic whose register is off fails its lookup and registers nothing.
func TestBuildRegistersTheConfiguredSchema(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	topic, closed := testsupport.UniqueName("schema_reg"), testsupport.UniqueName("schema_noreg")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	file := filepath.Join(t.TempDir(), "e.avsc")
	if err := os.WriteFile(file, []byte(`{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`broker: kafka
kafka:
  brokers: [%s]
schema_registry:
  url: %s
  register: true
  schemas:
    %s: {type: AVRO, file: %s}
    %s: {schema: '{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}'}
  topics:
    %s: {register: false}
`, strings.Join(brokers, ", "), registryURL, schema.Subject(topic), file, schema.Subject(closed), closed)
	cfg, err := brokerconfig.Parse([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := cfg.String(); !strings.Contains(out, "register=true") || !strings.Contains(out, "register:false") {
		t.Errorf("printed configuration does not show register: %s", out)
	}
	b, err := brokerconfig.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	each := b.Publisher().(interface {
		PublishEach(context.Context, string, []*message.Message) []error
	})
	msg := func() *message.Message {
		m := message.NewMessage(watermill.NewUUID(), []byte(`{"n":7}`))
		m.Metadata.Set(outbox.MetadataAggregateID, "a")
		return m
	}
	if errs := each.PublishEach(context.Background(), topic, []*message.Message{msg()}); errs[0] != nil {
		t.Fatalf("publish with register on: %v", errs[0])
	}
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.SchemaByVersion(context.Background(), schema.Subject(topic), -1)
	if err != nil {
		t.Fatalf("the relay did not register %s: %v", schema.Subject(topic), err)
	}
	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	var header sr.ConfluentHeader
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	if id, body, err := header.DecodeID(records[0].Value); err != nil || id != ss.ID || !bytes.Equal(body, []byte{14}) {
		t.Fatalf("record value % x: id %d err %v, want id %d and the Avro long 7 (0e)", records[0].Value, id, err, ss.ID)
	}

	errs := each.PublishEach(context.Background(), closed, []*message.Message{msg()})
	if errs[0] == nil || !schema.Retriable(errs[0]) {
		t.Errorf("publish with register off for the topic: %v, want a retriable lookup failure", errs[0])
	}
	if versions, _ := cl.SubjectVersions(context.Background(), schema.Subject(closed)); len(versions) != 0 {
		t.Errorf("register off for %s, yet it has versions %v", closed, versions)
	}
}

// A bad registration or cache setting in the file is refused with its YAML path and value.
func TestSchemaRegistrationConfigErrorsNameTheValue(t *testing.T) {
	const base = "broker: kafka\nkafka:\n  brokers: [k:9092]\nschema_registry:\n  url: http://r\n"
	for doc, want := range map[string]string{
		base + "  register: true\n": "schema_registry.register: on, but no schemas are given to register",
		base + "  cache_size: -1\n": "schema_registry.cache_size: -1 is negative",
		base + "  register: true\n  schemas:\n    orders-value: {type: avro2, schema: x}\n":                     `schema_registry.schemas.orders-value.type: "avro2": want AVRO, PROTOBUF or JSON`,
		base + "  schemas:\n    orders-value: {schema: '\"long\"'}\n":                                           `schema_registry.schemas: given for ["orders-value"], but register is off (by default and for every topic)`,
		base + "  register: true\n  schemas:\n    orders-value: {file: /nonexistent/o.avsc}\n":                  "schema_registry.schemas.orders-value.file: open /nonexistent/o.avsc: no such file or directory",
		base + "  version: 2\n  register: true\n  schemas:\n    orders-value: {schema: '\"long\"'}\n":           "schema_registry.version: 2 with register on: the relay registers version 1 of a missing subject; use version 0 (latest) or 1",
		base + "  topics:\n    refunds: {register: true}\n  schemas:\n    refund-value: {schema: '\"long\"'}\n": `schema_registry.topics.refunds.register: on, but schemas has no "refunds-value" (the topic's subject) to register`,
	} {
		_, err := brokerconfig.Parse([]byte(doc), nil)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}
