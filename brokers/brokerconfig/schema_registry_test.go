package brokerconfig_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Every bad schema_registry value is refused with its YAML path and the value (never a secret).
func TestSchemaRegistryConfigErrorsNameTheValue(t *testing.T) {
	const kafkaBase = "broker: kafka\nkafka:\n  brokers: [k:9092]\n"
	for _, tc := range []struct{ doc, want string }{
		{kafkaBase + "schema_registry:\n  url: ftp://r\n", `schema_registry.url: "ftp://r" is not an http(s) URL with a host`},
		{kafkaBase + "schema_registry:\n  url: http://u:p@r\n", "schema_registry.url: has credentials in it; use username and password"},
		{kafkaBase + "schema_registry:\n  url: http://r\n  version: -1\n", "schema_registry.version: -1: want 0 (latest) or a version number from 1"},
		{kafkaBase + "schema_registry:\n  url: http://r\n  latest_ttl: -1s\n", "schema_registry.latest_ttl: -1s is negative"},
		{kafkaBase + "schema_registry:\n  url: http://r\n  subject_strategy: record_name\n", `schema_registry.subject_strategy: "record_name": want topic, record or topic_record`},
		{kafkaBase + "schema_registry:\n  url: http://r\n  topics:\n    payments: {subject: shop.v1.Payment, subject_strategy: record}\n",
			`schema_registry.topics.payments: subject "shop.v1.Payment" and subject_strategy "record": set one`},
		{kafkaBase + "schema_registry:\n  url: http://r\n  topics:\n    payments: {version: -3}\n",
			"schema_registry.topics.payments: version: -3: want 0 (latest) or a version number from 1"},
		{kafkaBase + "schema_registry:\n  url: http://r\n  password: Secret-9\n", "schema_registry.password: set without username"},
		{kafkaBase + "schema_registry:\n  url: http://r\n  username: u\n  bearer_token: Tok-9\n", "schema_registry.bearer_token: set together with username (choose basic or bearer authentication)"},
		{"broker: pulsar\npulsar:\n  url: pulsar://p:6650\nformat: cloudevents\ncloudevents: {source: /s}\nschema_registry:\n  url: http://r\n",
			"schema_registry: not supported with broker pulsar and format cloudevents (Pulsar carries the schema itself, not the Confluent ids ce_dataschema names)"},
		{"broker: pulsar\npulsar:\n  url: pulsar://p:6650\nschema_registry:\n  url: http://r\n  version: -2\n", "schema_registry.version: -2: want 0 (latest) or a version number from 1"},
		{"broker: nats\nnats:\n  urls: [nats://n:4222]\nschema_registry:\n  url: http://r\n", "schema_registry: not supported with broker nats yet (kafka, kfake and pulsar only)"},
	} {
		_, err := brokerconfig.Parse([]byte(tc.doc), nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestSchemaRegistrySecretsAreRedacted(t *testing.T) {
	const password, token = "Reg-Secret-1", "Reg-Token-2"
	for _, auth := range []string{"  username: u\n  password: " + password, "  bearer_token: " + token} {
		cfg, err := brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [k:9092]\nschema_registry:\n  url: http://r\n"+auth+"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("loaded", "config", cfg)
		for name, out := range map[string]string{"String": cfg.String(), "%+v": fmt.Sprintf("%+v", cfg),
			"%#v": fmt.Sprintf("%#v", cfg), "slog": buf.String(), "section %+v": fmt.Sprintf("%+v", cfg.SchemaRegistry)} {
			if strings.Contains(out, password) || strings.Contains(out, token) {
				t.Errorf("%s shows a secret: %s", name, out)
			}
			if !strings.Contains(out, "http://r") {
				t.Errorf("%s does not show the registry url: %s", name, out)
			}
		}
	}
}

// Build with a schema_registry section gives a publisher that encodes with the real registry into
// the real Kafka: a fitting event is delivered, one that does not fit fails permanently.
func TestBuildWithSchemaRegistryEncodes(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("schema_cfg")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(context.Background(), schema.Subject(topic), sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n",
		strings.Join(brokers, ", "), registryURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	pub := b.Publisher()
	each, ok := pub.(interface {
		PublishEach(context.Context, string, []*message.Message) []error
	})
	classifier, ok2 := pub.(interface{ Retriable(error) bool })
	if !ok || !ok2 {
		t.Fatalf("publisher %T lacks PublishEach or Retriable", pub)
	}
	good := message.NewMessage(watermill.NewUUID(), []byte(`{"n":7}`))
	good.Metadata.Set(outbox.MetadataAggregateID, "a")
	bad := message.NewMessage(watermill.NewUUID(), []byte(`{"n":"seven"}`))
	bad.Metadata.Set(outbox.MetadataAggregateID, "b")
	errs := each.PublishEach(context.Background(), topic, []*message.Message{good, bad})
	var mismatch *schema.MismatchError
	if errs[0] != nil || !errors.As(errs[1], &mismatch) || mismatch.Path != "$.n" || classifier.Retriable(errs[1]) {
		t.Fatalf("outcomes %v, want nil and a permanent mismatch at $.n", errs)
	}
	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	var header sr.ConfluentHeader
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	if id, body, err := header.DecodeID(records[0].Value); err != nil || id != ss.ID || !bytes.Equal(body, []byte{14}) {
		t.Fatalf("record value % x: id %d body % x err %v, want id %d and the Avro long 7 (0e)", records[0].Value, id, body, err, ss.ID)
	}
}

// The schema_registry example of docs/configuration.md parses, with its subject strategy, and
// its password does not show when the configuration is printed.
func TestSchemaRegistryDocExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc[bytes.Index(doc, []byte("### Schema registry")):])
	start := strings.Index(section, "```yaml\n") + len("```yaml\n")
	block := section[start : start+strings.Index(section[start:], "```")]
	cfg, err := brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [k:9092]\n"+block), nil)
	if err != nil {
		t.Fatalf("docs example:\n%s\n%v", block, err)
	}
	if cfg.SchemaRegistry.SubjectStrategy != schema.StrategyTopicRecord || cfg.SchemaRegistry.Username != "relay" ||
		cfg.SchemaRegistry.Topics["payments"] != (schema.TopicConfig{Subject: "shop.v1.Payment", Version: 3}) {
		t.Errorf("parsed %+v", cfg.SchemaRegistry)
	}
	if out := cfg.String(); strings.Contains(out, cfg.SchemaRegistry.Password) || !strings.Contains(out, "subject_strategy=topic_record") {
		t.Errorf("printed: %s", out)
	}
}

// The OUTBOXKIT_SCHEMA_REGISTRY_* variables override the file; a bad value names the variable,
// the key and the value, never a secret's.
func TestSchemaRegistryEnvOverrides(t *testing.T) {
	const base = "broker: kafka\nkafka:\n  brokers: [k:9092]\nschema_registry:\n  url: http://file-registry\n"
	env := map[string]string{
		"OUTBOXKIT_SCHEMA_REGISTRY_URL":                      "https://env-registry:8081",
		"OUTBOXKIT_SCHEMA_REGISTRY_SUBJECT_STRATEGY":         "record",
		"OUTBOXKIT_SCHEMA_REGISTRY_LATEST_TTL":               "30s",
		"OUTBOXKIT_SCHEMA_REGISTRY_USERNAME":                 "relay",
		"OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD":                 "Env-Secret-3",
		"OUTBOXKIT_SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY": "true",
	}
	lookup := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cfg, err := brokerconfig.Parse([]byte(base), lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.SchemaRegistry
	if r.URL != "https://env-registry:8081" || r.SubjectStrategy != schema.StrategyRecord || r.LatestTTL != 30*time.Second ||
		r.Username != "relay" || r.Password != "Env-Secret-3" || !r.TLS.InsecureSkipVerify {
		t.Errorf("overrides not applied: %+v", r)
	}
	for name, want := range map[string]string{
		"OUTBOXKIT_SCHEMA_REGISTRY_VERSION=x":                    `OUTBOXKIT_SCHEMA_REGISTRY_VERSION (schema_registry.version): "x" is not an integer`,
		"OUTBOXKIT_SCHEMA_REGISTRY_SUBJECT_STRATEGY=bad":         `OUTBOXKIT_SCHEMA_REGISTRY_SUBJECT_STRATEGY (schema_registry.subject_strategy): schema_registry.subject_strategy: "bad": want topic, record or topic_record`,
		"OUTBOXKIT_SCHEMA_REGISTRY_TLS_CA_FILE=/nonexistent.pem": `OUTBOXKIT_SCHEMA_REGISTRY_TLS_CA_FILE (schema_registry.tls.ca_file): schema_registry.tls.ca_file: set, but url "http://file-registry" is not https`,
		"OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD=Env-Secret-4":        "schema_registry.password: set without username",
	} {
		k, v, _ := strings.Cut(name, "=")
		_, err := brokerconfig.Parse([]byte(base), lookup(map[string]string{k: v}))
		if err == nil || !strings.HasSuffix(err.Error(), want) || strings.Contains(err.Error(), "Env-Secret-4") {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// With format cloudevents and a schema_registry, the events are CloudEvents whose data is the
// encoded payload: content-type names the encoding (replacing the writer's JSON content type) and
// ce_dataschema the registry's URL of the schema, beside the ce_* attributes.
func TestBuildWithSchemaRegistryAndCloudEvents(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("schema_ce")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(context.Background(), schema.Subject(topic), sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nformat: cloudevents\ncloudevents:\n  source: /shop\nschema_registry:\n  url: %s\n",
		strings.Join(brokers, ", "), registryURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"n":7}`))
	msg.Metadata.Set(outbox.MetadataAggregateID, "a")
	msg.Metadata.Set(outbox.MetadataEventType, "Counted")
	msg.Metadata.Set("Content-Type", "application/json")
	each := b.Publisher().(interface {
		PublishEach(context.Context, string, []*message.Message) []error
	})
	if errs := each.PublishEach(context.Background(), topic, []*message.Message{msg}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	records := testsupport.ReadKafkaTopic(t, brokers, topic)
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	headers := map[string][]string{}
	for _, h := range records[0].Headers {
		headers[h.Key] = append(headers[h.Key], string(h.Value))
	}
	want := map[string]string{"ce_type": "Counted", "ce_source": "/shop", "ce_specversion": "1.0", "ce_subject": "a",
		"content-type": "application/avro", "ce_dataschema": registryURL + "/schemas/ids/" + fmt.Sprint(ss.ID)}
	for k, v := range want {
		if len(headers[k]) != 1 || headers[k][0] != v {
			t.Errorf("header %s = %q, want %q", k, headers[k], v)
		}
	}
	if got := headers["Content-Type"]; len(got) != 0 {
		t.Errorf("the writer's Content-Type header is still there: %q", got)
	}
	var header sr.ConfluentHeader
	if id, body, err := header.DecodeID(records[0].Value); err != nil || id != ss.ID || !bytes.Equal(body, []byte{14}) {
		t.Errorf("value % x: id %d err %v, want id %d and the Avro long 7", records[0].Value, id, err, ss.ID)
	}
}
