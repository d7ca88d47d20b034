package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// wantSummary is what every broker must deliver: both accounts' events, each in commit order.
const wantSummary = `per key, in order:
  acct-1: AccountOpened, MoneyDeposited, MoneyWithdrawn
  acct-2: AccountOpened, MoneyDeposited, AccountClosed
all 6 events delivered through `

// TestSwitchBroker runs the same program with the folder's configuration files (the real Kafka,
// Pulsar, NATS and RabbitMQ, addresses from the environment overrides, and kfake) and checks that each
// delivers the same events in the same per-key order.
func TestSwitchBroker(t *testing.T) {
	cases := []struct {
		file, broker string
		env          func(t *testing.T) map[string]string
	}{
		{"kafka.yaml", "kafka", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_KAFKA_BROKERS": strings.Join(testsupport.KafkaBrokers(t), ",")}
		}},
		{"pulsar.yaml", "pulsar", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_PULSAR_URL": testsupport.PulsarURL(t)}
		}},
		{"nats.yaml", "nats", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_NATS_URLS": testsupport.NATSURL(t)}
		}},
		{"rabbitmq.yaml", "rabbitmq", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_RABBITMQ_AMQP_URL": testsupport.RabbitMQURL(t)}
		}},
		{"kfake.yaml", "kfake", func(*testing.T) map[string]string { return nil }},
		{"kafka-avro.yaml", "kafka", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_KAFKA_BROKERS": strings.Join(testsupport.KafkaBrokers(t), ","),
				"OUTBOXKIT_SCHEMA_REGISTRY_URL": testsupport.SchemaRegistryURL(t)}
		}},
		{"pulsar-avro.yaml", "pulsar", func(t *testing.T) map[string]string {
			return map[string]string{"OUTBOXKIT_PULSAR_URL": testsupport.PulsarURL(t),
				"OUTBOXKIT_SCHEMA_REGISTRY_URL": testsupport.SchemaRegistryURL(t)}
		}},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			env := tc.env(t)
			var out bytes.Buffer
			err := run(context.Background(), &out, options{
				ConfigPath: tc.file, Unique: true, Timeout: 60 * time.Second,
				LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			})
			got := out.String()
			t.Log("\n" + got)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !strings.HasPrefix(got, "broker: "+tc.broker+" (from "+tc.file+")") {
				t.Fatalf("output does not start with the broker %s", tc.broker)
			}
			if want := wantSummary + tc.broker + ","; !strings.Contains(got, want) {
				t.Fatalf("output lacks\n%s", want)
			}
			if n := strings.Count(got, "  received key "); n != 6 {
				t.Fatalf("%d events printed, want 6", n)
			}
			if strings.HasSuffix(tc.file, "-avro.yaml") {
				checkAvro(t, tc.broker, got)
			}
		})
	}
}

// checkAvro checks a run with a schema_registry section: the schema was registered, and on Pulsar
// the topic's schema in Pulsar's own registry is Avro (the relay's producer put it there).
func checkAvro(t *testing.T, broker, output string) {
	t.Helper()
	if !strings.Contains(output, "\nschema: Avro, subject accounts_") {
		t.Fatalf("output does not name the registered Avro schema")
	}
	if broker != "pulsar" {
		return
	}
	_, rest, _ := strings.Cut(output, `topic "`)
	topic, _, _ := strings.Cut(rest, `"`)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(testsupport.PulsarHTTPURL() + "/admin/v2/schemas/public/default/" + topic + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Type != "AVRO" || !strings.Contains(info.Data, "example.accounts") {
		t.Fatalf("topic %s's schema in Pulsar: %s %+v (%v), want the Avro change schema", topic, resp.Status, info, err)
	}
}
