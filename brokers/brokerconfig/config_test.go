package brokerconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// buildYAML parses the configuration yaml and builds its brokers, closed when the test ends.
func buildYAML(t *testing.T, ctx context.Context, yaml string) (brokerconfig.Config, *brokerconfig.Brokers) {
	t.Helper()
	cfg, err := brokerconfig.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return cfg, b
}

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"missing broker", "kafka:\n  brokers: [a:1]\n", nil, "broker: missing (allowed: kafka, pulsar, nats, rabbitmq, kfake)"},
		{"unknown broker", "broker: activemq\n", nil, `broker: unknown value "activemq" (allowed: kafka, pulsar, nats, rabbitmq, kfake)`},
		{"unknown top-level key", "broker: kafka\nbrokr: x\n", nil, "field brokr not found"},
		{"unknown kafka key", "broker: kafka\nkafka:\n  brokers: [a:1]\n  compresion: lz4\n", nil, "field compresion not found"},
		{"unknown pulsar key", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  token: x\n", nil, "field token not found"},
		{"bad yaml type", "broker: kafka\nkafka:\n  message_max_bytes: lots\n", nil, "kafka.message_max_bytes (line 3): cannot unmarshal !!str `lots` into int"},
		{"bad yaml type in a list", "broker: kafka\nkafka:\n  brokers:\n    - a:1\n    - [b]\n", nil, "kafka.brokers[1] (line 5): cannot unmarshal"},
		{"kafka.brokers", "broker: kafka\n", nil, "kafka.brokers: missing"},
		{"kafka.brokers address", "broker: kafka\nkafka:\n  brokers: [nohost]\n", nil, `kafka.brokers[0]: "nohost"`},
		{"kafka.version", "broker: kafka\nkafka:\n  brokers: [a:1]\n  version: 0.10.0\n", nil, `kafka.version: "0.10.0"`},
		{"kafka.compression", "broker: kafka\nkafka:\n  brokers: [a:1]\n  compression: brotli\n", nil, `kafka.compression: unknown value "brotli"`},
		{"kafka.partitioner", "broker: kafka\nkafka:\n  brokers: [a:1]\n  partitioner: x\n", nil, `kafka.partitioner: unknown value "x"`},
		{"kafka.message_max_bytes", "broker: kafka\nkafka:\n  brokers: [a:1]\n  message_max_bytes: -5\n", nil, "kafka.message_max_bytes: -5"},
		{"kafka.producer_retries", "broker: kafka\nkafka:\n  brokers: [a:1]\n  producer_retries: -1\n", nil, "kafka.producer_retries: -1"},
		{"kafka.retry_backoff", "broker: kafka\nkafka:\n  brokers: [a:1]\n  retry_backoff: -1s\n", nil, "kafka.retry_backoff: -1s"},
		{"kafka.initial_offset", "broker: kafka\nkafka:\n  brokers: [a:1]\n  initial_offset: middle\n", nil, `kafka.initial_offset: unknown value "middle"`},
		{"kafka.nack_resend_sleep", "broker: kafka\nkafka:\n  brokers: [a:1]\n  nack_resend_sleep: -1s\n", nil, "kafka.nack_resend_sleep: -1s"},
		{"kafka.topic_partitions", "broker: kafka\nkafka:\n  brokers: [a:1]\n  topic_partitions: -1\n", nil, "kafka.topic_partitions: -1"},
		{"kafka.topic_replication_factor", "broker: kafka\nkafka:\n  brokers: [a:1]\n  topic_replication_factor: -1\n", nil, "kafka.topic_replication_factor: -1"},
		{"kafka.tls.ca_file", "broker: kafka\nkafka:\n  brokers: [a:1]\n  tls: {ca_file: /nonexistent/ca.pem}\n", nil, `kafka.tls.ca_file: "/nonexistent/ca.pem"`},
		{"kafka.tls.cert_file", "broker: kafka\nkafka:\n  brokers: [a:1]\n  tls: {cert_file: /x.pem}\n", nil, "kafka.tls.cert_file"},
		{"kafka.sasl.mechanism", "broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: KERBEROS, username: u, password: p}\n", nil, `kafka.sasl.mechanism: unknown value "KERBEROS"`},
		{"kafka.sasl.username", "broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: PLAIN, password: p}\n", nil, "kafka.sasl.username: missing"},
		{"kafka.sasl.password", "broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: SCRAM-SHA-256, username: u}\n", nil, "kafka.sasl.password: missing"},
		{"kfake.partitions", "broker: kfake\nkfake:\n  partitions: -2\n", nil, "kfake.partitions: -2"},
		{"kfake with tls", "broker: kfake\nkafka:\n  tls: {enabled: true}\n", nil, "kafka.tls: not supported with broker kfake"},
		{"kfake with sasl", "broker: kfake\nkafka:\n  sasl: {mechanism: PLAIN, username: u, password: p}\n", nil, "kafka.sasl: not supported with broker kfake"},
		{"pulsar.url", "broker: pulsar\n", nil, "pulsar.url: missing"},
		{"pulsar.url scheme", "broker: pulsar\npulsar:\n  url: ftp://h:1\n", nil, "pulsar.url: "},
		{"pulsar.auth_token", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  auth_token: t\n  auth_token_file: /f\n", nil, "pulsar.auth_token"},
		{"pulsar.compression", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  compression: brotli\n", nil, `pulsar.compression: Compression "brotli"`},
		{"pulsar.send_timeout", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  send_timeout: -1s\n", nil, "pulsar.send_timeout: "},
		{"pulsar.subscription_type", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  subscription_type: fanout\n", nil, `pulsar.subscription_type: SubscriptionType "fanout"`},
		{"pulsar.initial_position", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  initial_position: middle\n", nil, `pulsar.initial_position: InitialPosition "middle"`},
		{"pulsar.tenant", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  tenant: 'a b'\n", nil, `pulsar.tenant: Tenant "a b"`},
		{"pulsar.dead_letter.max_deliveries", "broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  dead_letter: {max_deliveries: 0}\n", nil, "pulsar.dead_letter.max_deliveries"},
		{"env bad integer", "broker: kafka\nkafka:\n  brokers: [a:1]\n", map[string]string{"OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES": "big"}, `OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES (kafka.message_max_bytes): "big" is not an integer`},
		{"env bad duration", "broker: kafka\nkafka:\n  brokers: [a:1]\n", map[string]string{"OUTBOXKIT_KAFKA_RETRY_BACKOFF": "soon"}, "OUTBOXKIT_KAFKA_RETRY_BACKOFF (kafka.retry_backoff)"},
		{"env bad bool", "broker: kafka\nkafka:\n  brokers: [a:1]\n", map[string]string{"OUTBOXKIT_KAFKA_TLS_ENABLED": "maybe"}, "OUTBOXKIT_KAFKA_TLS_ENABLED (kafka.tls.enabled)"},
		{"env unknown broker", "", map[string]string{"OUTBOXKIT_BROKER": "activemq"}, `broker: unknown value "activemq"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := brokerconfig.Parse([]byte(tc.yaml), envMap(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	yaml := "broker: pulsar\nkafka:\n  brokers: [from-file:9092]\n  consumer_group: file-group\npulsar:\n  url: pulsar://file:6650\n"
	cfg, err := brokerconfig.Parse([]byte(yaml), envMap(map[string]string{
		"OUTBOXKIT_BROKER":                   "kafka",
		"OUTBOXKIT_KAFKA_BROKERS":            "a:9092, b:9092",
		"OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES":  "2000000",
		"OUTBOXKIT_KAFKA_RETRY_BACKOFF":      "250ms",
		"OUTBOXKIT_KAFKA_SASL_MECHANISM":     "SCRAM-SHA-512",
		"OUTBOXKIT_KAFKA_SASL_USERNAME":      "relay",
		"OUTBOXKIT_KAFKA_SASL_PASSWORD":      "pw",
		"OUTBOXKIT_KAFKA_TOPIC_PARTITIONS":   "12",
		"OUTBOXKIT_PULSAR_URL":               "pulsar://env:6650",
		"OUTBOXKIT_PULSAR_DEAD_LETTER_TOPIC": "dlq",
	}))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kafka
	if cfg.Broker != "kafka" || strings.Join(k.Brokers, ",") != "a:9092,b:9092" || k.MessageMaxBytes != 2000000 ||
		k.RetryBackoff != 250*time.Millisecond || k.SASL.Mechanism != "SCRAM-SHA-512" || k.SASL.Username != "relay" ||
		k.SASL.Password != "pw" || k.TopicPartitions != 12 {
		t.Errorf("environment not applied: %+v", cfg)
	}
	if k.ConsumerGroup != "file-group" || k.Compression != "lz4" {
		t.Errorf("file value or default lost: group %q compression %q", k.ConsumerGroup, k.Compression)
	}
	if cfg.Pulsar.URL != "pulsar://env:6650" || cfg.Pulsar.DeadLetter == nil || cfg.Pulsar.DeadLetter.Topic != "dlq" {
		t.Errorf("pulsar environment not applied: %+v", cfg.Pulsar)
	}

	// Load reads the real process environment.
	path := filepath.Join(t.TempDir(), "brokers.yaml")
	if err := os.WriteFile(path, []byte("broker: kafka\nkafka:\n  brokers: [file:9092]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTBOXKIT_BROKER", "kfake")
	t.Setenv("OUTBOXKIT_KFAKE_PARTITIONS", "7")
	loaded, err := brokerconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Broker != "kfake" || loaded.KFake.Partitions != 7 {
		t.Errorf("Load ignored the environment: %v", loaded)
	}
	if _, err := brokerconfig.Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// Every environment variable is documented in docs/configuration.md.
func TestEveryEnvVarIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range brokerconfig.EnvNames() {
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("%s is not documented in docs/configuration.md", name)
		}
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	const kafkaSecret, pulsarSecret = "kafka-Secret-1", "eyJhbGciOi.pulsar-Token-2"
	for _, broker := range []string{"kafka", "pulsar"} {
		yaml := fmt.Sprintf("broker: %s\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: PLAIN, username: u, password: %s}\npulsar:\n  url: pulsar://h:6650\n  auth_token: %s\n",
			broker, kafkaSecret, pulsarSecret)
		cfg, err := brokerconfig.Parse([]byte(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("loaded", "config", cfg)
		outs := map[string]string{
			"String": cfg.String(), "%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg),
			"%#v": fmt.Sprintf("%#v", cfg), "slog": buf.String(),
			"kafka %+v": fmt.Sprintf("%+v", cfg.Kafka), "pulsar %+v": fmt.Sprintf("%+v", cfg.Pulsar),
		}
		for name, out := range outs {
			if strings.Contains(out, kafkaSecret) || strings.Contains(out, pulsarSecret) {
				t.Errorf("%s %s shows a secret: %s", broker, name, out)
			}
		}
		if !strings.Contains(outs["slog"], "REDACTED") {
			t.Errorf("%s: slog output lacks the redaction mark: %s", broker, outs["slog"])
		}
	}
	// Nor in errors, also when the secret comes from the environment.
	_, err := brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: NOPE}\n"),
		envMap(map[string]string{"OUTBOXKIT_KAFKA_SASL_USERNAME": "u", "OUTBOXKIT_KAFKA_SASL_PASSWORD": kafkaSecret}))
	if err == nil || strings.Contains(err.Error(), kafkaSecret) {
		t.Errorf("error missing or shows the secret: %v", err)
	}
}

func TestBuildKFakeAndClose(t *testing.T) {
	cfg, err := brokerconfig.Parse([]byte("broker: kfake\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Broker() != "kfake" || len(b.Addrs()) != 1 {
		t.Errorf("broker %q addrs %v", b.Broker(), b.Addrs())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.NewSubscriber("g"); err == nil {
		t.Error("NewSubscriber after Close succeeded")
	}
	if _, err := brokerconfig.Build(context.Background(), brokerconfig.Config{Broker: "activemq"}, nil); err == nil ||
		!strings.Contains(err.Error(), `"activemq"`) {
		t.Errorf("Build of an unknown broker: %v", err)
	}
}
