package brokerconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

func TestRabbitMQConfigErrorsNameTheField(t *testing.T) {
	const base = "broker: rabbitmq\nrabbitmq:\n  url: amqp://127.0.0.1:5672/\n"
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"rabbitmq.url", "broker: rabbitmq\n", nil, "rabbitmq.url: missing"},
		{"rabbitmq.url scheme", "broker: rabbitmq\nrabbitmq:\n  url: http://u:pw-Secret-9@h:1/\n", nil, `rabbitmq.url: "http://u:REDACTED@h:1/" is not an AMQP URL`},
		{"unknown rabbitmq key", base + "  exchange: x\n", nil, "field exchange not found"},
		{"rabbitmq.password", base + "  username: u\n", nil, "rabbitmq.username/password: set both or neither"},
		{"rabbitmq.partitions", base + "  partitions: 5000\n", nil, "rabbitmq.partitions: 5000 out of range 0..1024"},
		{"rabbitmq.queue_type", base + "  queue_type: stream\n", nil, `rabbitmq.queue_type: unknown value "stream" (allowed: classic)`},
		{"rabbitmq.queue_type quorum", base + "  queue_type: quorum\n", nil, `rabbitmq.queue_type: "quorum" is refused: on a quorum queue with single-active-consumer`},
		{"env quorum", base, map[string]string{"OUTBOXKIT_RABBITMQ_QUEUE_TYPE": "quorum"}, `rabbitmq.queue_type: "quorum" is refused`},
		{"rabbitmq.tls needs amqps", base + "  tls: {ca_file: /ca.pem}\n", nil, "rabbitmq.url: \"amqp://127.0.0.1:5672/\": tls.* is set, which needs an amqps:// URL"},
		{"rabbitmq.consumer_group", base + "  consumer_group: 'a:b'\n", nil, `rabbitmq.consumer_group: "a:b" must not hold ':'`},
		{"env bad partitions", base, map[string]string{"OUTBOXKIT_RABBITMQ_PARTITIONS": "many"}, `OUTBOXKIT_RABBITMQ_PARTITIONS (rabbitmq.partitions): "many" is not an integer`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := brokerconfig.Parse([]byte(tc.yaml), envMap(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw-Secret-9") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

// The rabbitmq section from YAML and environment, with the defaults, and its secrets (the
// password, a password in the URL) never printed.
func TestRabbitMQConfigEnvDefaultsAndRedaction(t *testing.T) {
	const password, urlPassword = "rabbit-Secret-1", "url-Secret-22"
	cfg, err := brokerconfig.Parse([]byte("broker: rabbitmq\nrabbitmq:\n  url: amqp://a:5672/\n  username: relay\n"), envMap(map[string]string{
		"OUTBOXKIT_RABBITMQ_AMQP_URL": "amqps://relay:" + urlPassword + "@h1:5671/prod",
		"OUTBOXKIT_RABBITMQ_PASSWORD": password, "OUTBOXKIT_RABBITMQ_PARTITIONS": "16", "OUTBOXKIT_RABBITMQ_PUBLISH_TIMEOUT": "5s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.RabbitMQ
	if r.Partitions != 16 || r.PublishTimeout != 5*time.Second || r.QueueType != "classic" || r.KeyMetadata != "aggregate_id" ||
		r.MaxMessageSize != 16<<20 || r.Heartbeat != 10*time.Second {
		t.Fatalf("unexpected section: %+v", r)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "broker", cfg)
	for _, out := range []string{buf.String(), cfg.String(), fmt.Sprintf("%v %+v %#v", r, r, r)} {
		if strings.Contains(out, password) || strings.Contains(out, urlPassword) {
			t.Errorf("a secret is printed: %s", out)
		}
	}
	if !strings.Contains(cfg.String(), "password=[REDACTED]") || !strings.Contains(cfg.String(), "relay:REDACTED@h1") {
		t.Errorf("redacted fields missing: %s", cfg.String())
	}
}

// rabbitMQKeys reads the queues of the publisher's own group (the subscriber of the scenario
// consumed its group's copy) and checks that each message is in its key's partition queue;
// then it deletes the topic's queues and exchange.
func rabbitMQKeys(t *testing.T, cfg brokerconfig.Config, topic string, want map[string]string) {
	conn, err := amqp.Dial(cfg.RabbitMQ.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for p, queue := range cfg.RabbitMQ.Queues(topic) {
		for {
			m, ok, err := ch.Get(queue, true)
			if err != nil {
				t.Fatalf("get from %s: %v", queue, err)
			}
			if !ok {
				break
			}
			seen++
			id, _ := m.Headers[rabbitmq.UUIDHeader].(string)
			if got := rabbitmq.Partition(want[id], cfg.RabbitMQ.Partitions); got != p {
				t.Errorf("rabbitmq message %s of key %s in queue %s (partition %d), want partition %d", id, want[id], queue, p, got)
			}
		}
		_, _ = ch.QueueDelete(queue, false, false, false)
	}
	_ = ch.ExchangeDelete(topic, false, false)
	if seen != len(want) {
		t.Errorf("the publisher's queues held %d messages, want %d", seen, len(want))
	}
}

// rabbitMQScenario is the scenario case of broker: rabbitmq, with 4 key-hash queues.
var rabbitMQScenario = scenarioCase{
	name: "rabbitmq",
	yaml: func(t *testing.T) string {
		return fmt.Sprintf("broker: rabbitmq\nrabbitmq:\n  url: %q\n  partitions: 4\n", testsupport.RabbitMQURL(t))
	},
	verifyKeys: rabbitMQKeys,
}

// TestRabbitMQRelayPerKeyOrderAndDeadLetter: a PostgreSQL outbox relayed by the forwarder to
// broker: rabbitmq (4 key-hash queues, max_message_size 1 MiB) through brokerconfig: every
// event in its key's queue in per-key order with the event id as message-id and UUID; the
// event above max_message_size dead-lettered at once into the dead-letter topic's queue, the
// later event of its key parked.
func TestRabbitMQRelayPerKeyOrderAndDeadLetter(t *testing.T) {
	url := testsupport.RabbitMQURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg, b := buildYAML(t, ctx, fmt.Sprintf("broker: rabbitmq\nrabbitmq:\n  url: %q\n  partitions: 4\n  max_message_size: 1048576\n", url))

	topic := "relay." + testsupport.UniqueName("rabbitmq")
	dlq := "dlq." + testsupport.UniqueName("rabbitmq")
	db, table, poison := relayPoisonedKeys(t, ctx, b.Publisher(), topic, dlq)
	var attempts int
	if err := db.QueryRowContext(ctx, "SELECT attempts FROM "+table+" WHERE event_id = $1", poison.ID).Scan(&attempts); err != nil || attempts != 1 {
		t.Errorf("the oversized event took %d attempts (%v), want 1 (a permanent error)", attempts, err)
	}

	msgs := takeQueues(t, url, cfg.RabbitMQ.Queues(topic))
	if len(msgs) != relayKeys*relayPerKey {
		t.Fatalf("%d messages in the queues, want %d", len(msgs), relayKeys*relayPerKey)
	}
	next := map[string]int{}
	for _, m := range msgs {
		key, _ := m.Headers["aggregate_id"].(string)
		if want := cfg.RabbitMQ.RoutingKey(topic, key); m.RoutingKey != want {
			t.Errorf("key %s with routing key %s, want %s", key, m.RoutingKey, want)
		}
		if id, _ := m.Headers["event_id"].(string); m.MessageId != id || m.Headers[rabbitmq.UUIDHeader] != id {
			t.Errorf("message-id %q, UUID %v, event_id %q: want all equal", m.MessageId, m.Headers[rabbitmq.UUIDHeader], id)
		}
		if want := fmt.Sprintf(`{"seq":%d}`, next[key]); string(m.Body) != want {
			t.Fatalf("key %s: got %s, want %s (out of order)", key, m.Body, want)
		}
		next[key]++
	}
	deadLetters := takeQueues(t, url, cfg.RabbitMQ.Queues(dlq))
	if len(deadLetters) != 1 || deadLetters[0].MessageId != poison.ID.String() {
		t.Fatalf("%d dead letters, want the poisoned event once", len(deadLetters))
	}
	t.Logf("dead letter reason: %q", deadLetters[0].Headers["reason_poisoned"])
}

// takeQueues takes every message of the queues, queue by queue in queue order, and deletes
// the queues.
func takeQueues(t *testing.T, url string, queues []string) []amqp.Delivery {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var out []amqp.Delivery
	for _, q := range queues {
		for {
			m, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatalf("get from %s: %v", q, err)
			}
			if !ok {
				break
			}
			out = append(out, m)
		}
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	return out
}
