package relayconfig

import (
	"strings"
	"testing"
)

// The broker part: unknown keys are named by their YAML path, brokerconfig's own errors keep
// the file's line numbers.
func TestParseErrorsBroker(t *testing.T) {
	checkParseErrors(t, []parseErrorCase{
		{"missing broker", base, nil, Options{Broker: true}, "broker: missing"},
		{"unknown broker", base + "broker: activemq\n", nil, Options{Broker: true}, `broker: unknown value "activemq" (allowed: kafka, pulsar, nats, rabbitmq, kfake)`},
		{"kafka without brokers", base + "broker: kafka\n", nil, Options{Broker: true}, "kafka.brokers"},
		{"unknown kafka key", base + "broker: kafka\nkafka:\n  brokers: [k:1]\n  compresion: lz4\n", nil, Options{}, "kafka.compresion: unknown key (line 8; allowed: brokers,"},
		{"unknown nested kafka key", base + "kafka:\n  sasl:\n    pasword: x\n", nil, Options{}, "kafka.sasl.pasword: unknown key (line 7"},
		{"unknown pulsar key", base + "pulsar:\n  ur1: pulsar://x\n", nil, Options{}, "pulsar.ur1: unknown key"},
		{"kafka bad value", base + "broker: kafka\nkafka:\n  brokers: [k:1]\n  compression: brotli\n", nil, Options{Broker: true}, `kafka.compression: unknown value "brotli"`},
		// brokerconfig's own YAML errors keep the line numbers of the original file.
		{"broker type error keeps line", base + "forwarder:\n  workers: 1\nbroker: kfake\nkfake:\n  partitions: many\n", nil, Options{Broker: true}, "line 9"},
		{"pulsar without url", base + "broker: pulsar\n", nil, Options{Broker: true}, "pulsar.url"},
		{"broker env", base + "broker: kafka\n", map[string]string{"OUTBOXKIT_KAFKA_BROKERS": "", "OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES": "lots"}, Options{Broker: true}, "OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES (kafka.message_max_bytes)"},
	})
}

func TestParseCloudEventsFormat(t *testing.T) {
	doc := "database:\n  dialect: postgres\n  dsn: postgres://x\nbroker: kfake\nformat: cloudevents\ncloudevents:\n  source: /orders-service\n"
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Broker.Format != "cloudevents" || cfg.Broker.CloudEvents.Source != "/orders-service" {
		t.Fatalf("format %q, source %q", cfg.Broker.Format, cfg.Broker.CloudEvents.Source)
	}
	_, err = Parse([]byte("database:\n  dialect: postgres\n  dsn: postgres://x\nbroker: kfake\nformat: xml\n"), nil, Options{Broker: true})
	if err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Fatalf("format xml: %v", err)
	}
}

// CheckRelay refuses broker kfake and names where it came from: the file or OUTBOXKIT_BROKER.
// Parse itself accepts kfake (the admin commands, which publish nothing, use it).
func TestCheckRelayRefusesKFake(t *testing.T) {
	cases := []struct {
		name, doc string
		env       map[string]string
		want      string // "" = accepted
	}{
		{"kafka", base + "broker: kafka\nkafka:\n  brokers: [k:9092]\n", nil, ""},
		{"pulsar", base + "broker: pulsar\npulsar:\n  url: pulsar://p:6650\n", nil, ""},
		{"kfake in the file", base + "broker: kfake\n", nil, "broker: kfake is an in-process test cluster: the relay would delete events that no one can read; use kafka or pulsar"},
		{"kfake upper case", base + "broker: KFake\n", nil, "broker: kfake is an in-process test cluster"},
		{"kfake from the environment", base + "broker: kafka\nkafka:\n  brokers: [k:9092]\n", map[string]string{"OUTBOXKIT_BROKER": " kfake "}, "OUTBOXKIT_BROKER: kfake is an in-process test cluster"},
		{"environment overrides kfake", base + "broker: kfake\nkafka:\n  brokers: [k:9092]\n", map[string]string{"OUTBOXKIT_BROKER": "kafka"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), env(tc.env), Options{Broker: true})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = CheckRelay(cfg, env(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckRelay: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckRelay: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Warnings names Pulsar's hostname verification opt-out, and nothing for a default configuration.
func TestWarnings(t *testing.T) {
	doc := base + "broker: pulsar\npulsar:\n  url: pulsar+ssl://p:6651\n"
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("default configuration: warnings %q", w)
	}
	cfg, err = Parse([]byte(doc+"  tls_skip_hostname_verification: true\n"), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], "TLS hostname verification is OFF") {
		t.Errorf("tls_skip_hostname_verification: warnings %q", w)
	}
}

// TestParseSchemaRegistry: the relay's file takes brokerconfig's schema_registry section (it
// refused it as an unknown section while brokerconfig and the docs offered it), and its
// errors keep their key.
func TestParseSchemaRegistry(t *testing.T) {
	doc := base + "broker: kafka\nkafka:\n  brokers: [k:1]\nschema_registry:\n  url: http://registry:8081\n"
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Broker.SchemaRegistry.URL != "http://registry:8081" {
		t.Fatalf("schema_registry.url: %q", cfg.Broker.SchemaRegistry.URL)
	}
	checkParseErrors(t, []parseErrorCase{
		{"unknown schema_registry key", base + "schema_registry:\n  ur1: http://r\n", nil, Options{}, "schema_registry.ur1: unknown key"},
		{"bad url", base + "broker: kafka\nkafka:\n  brokers: [k:1]\nschema_registry:\n  url: ftp://r\n", nil, Options{Broker: true}, `schema_registry.url: "ftp://r"`},
	})
}
