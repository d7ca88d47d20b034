package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/hamba/avro/v2"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// pulsarPythonRecord is a message as testdata/pulsar_avro_consumer.py prints it.
type pulsarPythonRecord struct {
	Key           string            `json:"key"`
	Properties    map[string]string `json:"properties"`
	SchemaVersion int64             `json:"schema_version"`
	WriterSchema  struct {
		Type   string `json:"type"`
		Schema string `json:"schema"`
	} `json:"writer_schema"`
	Value map[string]any `json:"value"`
}

// TestPythonPulsarAvroConsumerReadsTheEvents: events published through the decorator and
// brokers/pulsar into the real Pulsar, with the registry's Avro schema, are read by the Apache
// Pulsar Python client's typed consumer (AvroSchema of a Record class): the broker accepts the
// consumer's schema against the topic's, the writer schema of every message, fetched from the
// broker's registry by its version, is the registry's schema, and every field of every event
// equals its JSON payload with the schema's defaults filled in.
func TestPythonPulsarAvroConsumerReadsTheEvents(t *testing.T) {
	python := pythonEnv(t)
	cl, _, topic, id := registry(t)
	pub := newPulsarPublisher(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	payloads := []string{
		`{"id":"o-1","amount":9007199254740993,"qty":-3,"price":12.25,"paid":true,"status":"SHIPPED",
		  "note":"fragile","tags":["a","b"],"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"attrs":{"w":7}}`,
		`{"id":"o-2","amount":0,"qty":2147483647,"price":-0.5,"paid":false,"status":"NEW","items":[]}`,
		`{"id":"o-3","amount":-9223372036854775808,"qty":0,"price":1e-3,"paid":true,"status":"NEW",
		  "note":null,"tags":[],"items":[{"sku":"z","qty":-1}],"attrs":{"a":1,"b":-2}}`,
	}
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = orderMessage("K", i, p)
	}
	for i, err := range pub.(outcomePublisher).PublishEach(ctx, topic, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	ss, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	records := readPulsarWithPython(ctx, t, python, topic, len(payloads))
	if len(records) != len(payloads) {
		t.Fatalf("python read %d messages, want %d", len(records), len(payloads))
	}
	for i, r := range records {
		want := orderWithDefaults(t, payloads[i])
		if r.Key != "K" || r.Properties["seq"] != strconv.Itoa(i) || r.Properties["_watermill_message_uuid"] != msgs[i].UUID {
			t.Errorf("message %d: key %q properties %v", i, r.Key, r.Properties)
		}
		writer, err := avro.Parse(r.WriterSchema.Schema)
		if err != nil || r.WriterSchema.Type != "SchemaType.AVRO" || r.SchemaVersion < 0 ||
			writer.Fingerprint() != avro.MustParse(ss.Schema).Fingerprint() {
			t.Errorf("message %d: writer schema %s version %d %s (%v), want the registry's Avro schema %d",
				i, r.WriterSchema.Type, r.SchemaVersion, r.WriterSchema.Schema, err, id)
		}
		if !reflect.DeepEqual(normalize(r.Value), normalize(want)) {
			t.Errorf("message %d:\n python read %v\n want       %v", i, r.Value, want)
		}
	}
}

// readPulsarWithPython reads count messages of topic (in public/default) with
// testdata/pulsar_avro_consumer.py.
func readPulsarWithPython(ctx context.Context, t *testing.T, python, topic string, count int) []pulsarPythonRecord {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, "testdata/pulsar_avro_consumer.py", testsupport.PulsarURL(t),
		"persistent://public/default/"+topic, strconv.Itoa(count))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pulsar_avro_consumer.py: %v\nstderr:\n%s", err, stderr.String())
	}
	var records []pulsarPythonRecord
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&records); err != nil {
		t.Fatalf("pulsar_avro_consumer.py output %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	return records
}
