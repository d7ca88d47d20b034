package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// pythonEnv returns the python of the project's virtual environment (scripts/python-env.sh), which
// has confluent-kafka with the packages of its deserializers (fastavro, requests, protobuf,
// grpcio-tools, jsonschema). Missing: a skip, a failure in CI.
func pythonEnv(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", "../../scripts/python-env.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		testsupport.Unavailable(t, "the Python environment (scripts/python-env.sh)", &pythonEnvError{err, stderr.String()})
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "python")
}

type pythonEnvError struct {
	err    error
	stderr string
}

func (e *pythonEnvError) Error() string { return e.err.Error() + ": " + e.stderr }

// TestPythonAvroDeserializerReadsTheEvents: events published through the decorator into the real
// Kafka are read by confluent-kafka's AvroDeserializer in Python (schema by id from the registry),
// and every field of every event equals its JSON payload with the schema's defaults filled in.
func TestPythonAvroDeserializerReadsTheEvents(t *testing.T) {
	python := pythonEnv(t)
	cl, _, topic, _ := registry(t)
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	pub := newKafkaPublisher(t, brokers, cl, Config{})

	payloads := []string{
		`{"id":"o-1","amount":9007199254740993,"qty":-3,"price":12.25,"paid":true,"status":"SHIPPED",
		  "note":"fragile","tags":["a","b"],"items":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"attrs":{"w":7}}`,
		`{"id":"o-2","amount":0,"qty":2147483647,"price":-0.5,"paid":false,"status":"NEW","items":[]}`,
	}
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = orderMessage("K", i, p)
	}
	for i, err := range pub.(outcomePublisher).PublishEach(context.Background(), topic, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}

	records := readWithPython(t, python, "avro", brokers, topic, len(payloads))
	if len(records) != len(payloads) {
		t.Fatalf("python read %d records, want %d", len(records), len(payloads))
	}
	for i, r := range records {
		want := orderWithDefaults(t, payloads[i])
		if r.Key != "K" || r.Headers["seq"] != msgs[i].Metadata.Get("seq") {
			t.Errorf("record %d: key %q headers %v", i, r.Key, r.Headers)
		}
		if !reflect.DeepEqual(normalize(r.Value), normalize(want)) {
			t.Errorf("record %d:\n python read %v\n want       %v", i, r.Value, want)
		}
	}
}

// pythonRecord is a record as testdata/registry_consumer.py prints it.
type pythonRecord struct {
	Key     string            `json:"key"`
	Headers map[string]string `json:"headers"`
	Value   map[string]any    `json:"value"`
	Index   []int             `json:"index"`
}

// readWithPython reads count records of topic with testdata/registry_consumer.py: confluent-kafka's
// deserializer of format (avro, json or protobuf).
func readWithPython(t *testing.T, python, format string, brokers []string, topic string, count int) []pythonRecord {
	t.Helper()
	cmd := exec.Command(python, "testdata/registry_consumer.py", format, strings.Join(brokers, ","), topic,
		testsupport.SchemaRegistryURL(t), strconv.Itoa(count))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("registry_consumer.py %s: %v\nstderr:\n%s", format, err, stderr.String())
	}
	var records []pythonRecord
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&records); err != nil {
		t.Fatalf("registry_consumer.py %s output: %v\nstderr:\n%s", format, err, stderr.String())
	}
	return records
}

// normalize makes numbers comparable by value: an integer (however written: Python prints a
// double 0 as 0.0) becomes its int64, keeping a long's every digit; any other number its float64.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalize(x)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
			return int64(f)
		}
		return f
	}
	return v
}
