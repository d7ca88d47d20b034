package brokerconfig_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// Every variable the configuration reference documents in its table is one the loader reads: a
// documented variable that is ignored is worse than none.
func TestEveryDocumentedEnvVarIsRead(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	names := brokerconfig.EnvNames()
	rows := regexp.MustCompile("(?m)^\\| `(OUTBOXKIT_[A-Z0-9_]+)` \\|").FindAllSubmatch(doc, -1)
	if len(rows) < len(names) {
		t.Fatalf("found %d variable rows in docs/configuration.md, want at least %d", len(rows), len(names))
	}
	for _, r := range rows {
		if !slices.Contains(names, string(r[1])) {
			t.Errorf("docs/configuration.md documents %s, which brokerconfig does not read", r[1])
		}
	}
}

// A value that parses but that validation refuses is an error naming the variable as well as
// the key, since the file may not even have the key.
func TestInvalidEnvValueNamesTheVariable(t *testing.T) {
	cases := []struct{ doc, name, value string }{
		{"broker: kafka\nkafka:\n  brokers: [k:9092]\n", "OUTBOXKIT_BROKER", "kafak"},
		{"broker: kafka\nkafka:\n  brokers: [k:9092]\n", "OUTBOXKIT_KAFKA_COMPRESSION", "brotli"},
		{"broker: kafka\nkafka:\n  brokers: [k:9092]\n", "OUTBOXKIT_KAFKA_PRODUCER_RETRIES", "-3"},
		{"broker: pulsar\npulsar:\n  url: pulsar://p:6650\n", "OUTBOXKIT_PULSAR_SUBSCRIPTION_TYPE", "round_robin"},
		{"broker: kafka\nkafka:\n  brokers: [k:9092]\n", "OUTBOXKIT_FORMAT", "protobuf"},
		{"broker: kafka\nkafka:\n  brokers: [k:9092]\n", "OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES", "many"},
	}
	for _, c := range cases {
		_, err := brokerconfig.Parse([]byte(c.doc), func(n string) (string, bool) {
			if n == c.name {
				return c.value, true
			}
			return "", false
		})
		if err == nil {
			t.Errorf("%s=%s: accepted", c.name, c.value)
			continue
		}
		if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%s: error does not name the variable: %v", c.name, c.value, err)
		}
	}
}

// AppliedEnv lists the variables that override the configuration, by name only.
func TestAppliedEnvListsNamesOnly(t *testing.T) {
	got := brokerconfig.AppliedEnv(func(n string) (string, bool) {
		switch n {
		case "OUTBOXKIT_KAFKA_BROKERS":
			return "k:9092", true
		case "OUTBOXKIT_KAFKA_SASL_PASSWORD":
			return "hunter2-secret", true
		case "OUTBOXKIT_TEST_PG_DSN":
			return "postgres://x", true
		}
		return "", false
	})
	want := []string{"OUTBOXKIT_KAFKA_BROKERS", "OUTBOXKIT_KAFKA_SASL_PASSWORD"}
	if !slices.Equal(got, want) {
		t.Errorf("AppliedEnv = %v, want %v", got, want)
	}
}

// brokerconfig.Load, the documented library loader, reads the relay's own configuration files:
// the CLI's sections (database, forwarder, http, log) are skipped; other unknown keys still fail.
func TestLoadReadsTheRelaysFile(t *testing.T) {
	for _, path := range []string{"../../cmd/outboxkit/outboxkit.example.yaml", "../../examples/compose/outboxkit.yaml"} {
		cfg, err := brokerconfig.Parse(mustRead(t, path), nil)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if cfg.Broker == "" {
			t.Errorf("%s: no broker", path)
		}
	}
	if _, err := brokerconfig.Parse([]byte("broker: kafka\nkafka: {brokers: [k:1]}\ndatabse: {}\n"), nil); err == nil ||
		!strings.Contains(err.Error(), "databse") {
		t.Errorf("a misspelt section: %v, want an error naming it", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
