package brokerconfig_test

import (
	"bytes"
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
		{"rabbitmq.queue_type", base + "  queue_type: stream\n", nil, `rabbitmq.queue_type: unknown value "stream" (allowed: quorum, classic)`},
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
