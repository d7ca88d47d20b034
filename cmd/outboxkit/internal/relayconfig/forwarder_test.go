package relayconfig

import (
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder"
)

// The forwarder section: errors name the key, its line and the bounds.
func TestParseErrorsForwarder(t *testing.T) {
	checkParseErrors(t, []parseErrorCase{
		{"batch_size negative", base + "forwarder:\n  batch_size: -1\n", nil, Options{}, "forwarder.batch_size: must be positive, got -1"},
		{"max_batch_bytes zero", base + "forwarder:\n  max_batch_bytes: 0\n", nil, Options{}, "forwarder.max_batch_bytes: must be positive, got 0"},
		{"unlimited_retries not a bool", base + "forwarder:\n  unlimited_retries: sometimes\n", nil, Options{}, `forwarder.unlimited_retries: must be true or false, got "sometimes"`},
		{"batch_size too large", base + "forwarder:\n  batch_size: 5000\n", nil, Options{}, "forwarder.batch_size: must be at most 4000, got 5000"},
		{"batch_size not an integer", base + "forwarder:\n  batch_size: many\n", nil, Options{}, `forwarder.batch_size: must be an integer, got "many"`},
		{"workers negative", base + "forwarder:\n  workers: -2\n", nil, Options{}, "forwarder.workers: must be positive, got -2"},
		{"workers too many", base + "forwarder:\n  workers: 65\n", nil, Options{}, "forwarder.workers: must be at most 64"},
		{"max_attempts negative", base + "forwarder:\n  max_attempts: -3\n", nil, Options{}, "forwarder.max_attempts: must be positive, got -3"},
		{"duration without unit", base + "forwarder:\n  initial_interval: 5\n", nil, Options{}, `forwarder.initial_interval: must be a Go duration such as 500ms, 30s or 5m, got "5"`},
		{"duration garbage", base + "forwarder:\n  max_interval: soon\n", nil, Options{}, `forwarder.max_interval: must be a Go duration`},
		{"zero batch_size", base + "forwarder:\n  batch_size: 0\n", nil, Options{}, "forwarder.batch_size: must be positive, got 0 (line 6"},
		{"zero workers", base + "forwarder:\n  workers: 0\n", nil, Options{}, "forwarder.workers: must be positive, got 0"},
		{"zero max_attempts", base + "forwarder:\n  max_attempts: 0\n", nil, Options{}, "forwarder.max_attempts: must be positive, got 0"},
		{"negative retention", base + "forwarder:\n  retention: -1h\n", nil, Options{}, "forwarder.retention: must not be negative, got -1h0m0s"},
		{"zero initial_interval", base + "forwarder:\n  initial_interval: 0s\n", nil, Options{}, "forwarder.initial_interval: must be positive, got 0s"},
		{"negative max_interval", base + "forwarder:\n  max_interval: -1m\n", nil, Options{}, "forwarder.max_interval: must be positive, got -1m0s"},
		{"negative prune_interval", base + "forwarder:\n  prune_interval: -1s\n", nil, Options{}, "forwarder.prune_interval: must be positive, got -1s"},
		{"zero lease_ttl", base + "forwarder:\n  lease_ttl: 0s\n", nil, Options{}, "forwarder.lease_ttl: must be positive, got 0s"},
		{"negative min_poll_interval", base + "forwarder:\n  min_poll_interval: -1s\n", nil, Options{}, "forwarder.min_poll_interval: must be positive, got -1s"},
		{"zero max_poll_interval", base + "forwarder:\n  max_poll_interval: 0ms\n", nil, Options{}, "forwarder.max_poll_interval: must be positive, got 0s"},
		{"short lease_ttl", base + "forwarder:\n  lease_ttl: 100ms\n", nil, Options{}, "forwarder.lease_ttl: must be at least 1s, got 100ms"},
		{"max_poll below min_poll", base + "forwarder:\n  min_poll_interval: 2s\n", nil, Options{}, "forwarder.max_poll_interval: 1s is below forwarder.min_poll_interval 2s"},
		{"max_interval below initial", base + "forwarder:\n  initial_interval: 10m\n", nil, Options{}, "forwarder.max_interval: 5m0s is below forwarder.initial_interval 10m0s"},
		{"lease_group too long", base + "forwarder:\n  lease_group: " + strings.Repeat("g", 192) + "\n", nil, Options{}, "forwarder.lease_group: must be at most 191 bytes, got 192"},
		{"relay_id too long", base + "forwarder:\n  relay_id: " + strings.Repeat("r", 192) + "\n", nil, Options{}, "forwarder.relay_id: must be at most 191 bytes, got 192"},
		{"tenants not a list", base + "forwarder:\n  tenants: acme\n", nil, Options{}, `forwarder.tenants: must be a list of strings, got the value "acme"`},
		{"tenant not a string", base + "forwarder:\n  tenants: [[a]]\n", nil, Options{}, "forwarder.tenants[0]: must be a string, got a list"},
		{"tenant twice", base + "forwarder:\n  tenants: [a, b, a]\n", nil, Options{}, `forwarder.tenants[2]: "a" is listed twice`},
		{"unknown forwarder key", base + "forwarder:\n  batchsize: 10\n", nil, Options{}, "forwarder.batchsize: unknown key (line 6; allowed: batch_size,"},
		{"renamed forwarder key", base + "forwarder:\n  initial_backoff: 1s\n", nil, Options{}, "forwarder.initial_backoff: renamed forwarder.initial_interval (line 6; see CHANGELOG.md)"},
	})
}

func TestParseDelivery(t *testing.T) {
	base := "database:\n  dialect: postgres\n  dsn: postgres://x\n"
	kafkaDoc := base + "broker: kafka\nkafka:\n  brokers: [127.0.0.1:9092]\nforwarder:\n  delivery: exactly_once\n  checkpoint_topic: app.checkpoints\n  transactional_id_prefix: app/outbox\n  transactional_units: 8\n"
	cfg, err := Parse([]byte(kafkaDoc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	var fc forwarder.Config
	cfg.Forwarder.Apply(&fc)
	if fc.Delivery != forwarder.ExactlyOnce || fc.CheckpointTopic != "app.checkpoints" || fc.TransactionalIDPrefix != "app/outbox" || fc.TransactionalUnits != 8 {
		t.Errorf("Apply: delivery %q, checkpoint topic %q, prefix %q, units %d", fc.Delivery, fc.CheckpointTopic, fc.TransactionalIDPrefix, fc.TransactionalUnits)
	}
	env := map[string]string{EnvForwarderDelivery: " at_least_once "}
	cfg, err = Parse([]byte(kafkaDoc), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Options{Broker: true})
	if err != nil || cfg.Forwarder.Delivery != "at_least_once" {
		t.Errorf("%s override: delivery %q, error %v", EnvForwarderDelivery, cfg.Forwarder.Delivery, err)
	}
	for _, c := range []struct{ doc, want string }{
		{base + "forwarder:\n  transactional_units: 0\n", "forwarder.transactional_units: must be positive, got 0"},
		{base + "forwarder:\n  delivery: twice\n", `forwarder.delivery: unknown value "twice" (allowed: at_least_once, exactly_once; or set OUTBOXKIT_FORWARDER_DELIVERY)`},
		{base + "broker: pulsar\npulsar:\n  url: pulsar://127.0.0.1:6650\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "pulsar"`},
		{base + "broker: nats\nnats:\n  urls: [nats://127.0.0.1:4222]\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "nats": JetStream has no transaction`},
		{base + "broker: rabbitmq\nrabbitmq:\n  url: amqp://127.0.0.1:5672/\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "rabbitmq": RabbitMQ has no transaction`},
	} {
		_, err := Parse([]byte(c.doc), nil, Options{Broker: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got error %v, want it to contain %q", c.doc, err, c.want)
		}
	}
}

func TestParseSource(t *testing.T) {
	base := "database:\n  dialect: postgres\n  dsn: postgres://x\n"
	cfg, err := Parse([]byte(base+"forwarder:\n  source: cdc\n"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fc forwarder.Config
	cfg.Forwarder.Apply(&fc)
	if fc.Source != forwarder.SourceCDC {
		t.Errorf("Apply: source %q, want cdc", fc.Source)
	}
	cfg, err = Parse([]byte(base+"forwarder:\n  source: cdc\n  delivery: exactly_once\n"), nil, Options{})
	if err != nil || cfg.Forwarder.Source != "cdc" || cfg.Forwarder.Delivery != "exactly_once" {
		t.Errorf("source cdc with delivery exactly_once: source %q, delivery %q, error %v", cfg.Forwarder.Source, cfg.Forwarder.Delivery, err)
	}
	env := map[string]string{EnvForwarderSource: " polling "}
	cfg, err = Parse([]byte(base+"forwarder:\n  source: cdc\n"), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Options{})
	if err != nil || cfg.Forwarder.Source != "polling" {
		t.Errorf("%s override: source %q, error %v", EnvForwarderSource, cfg.Forwarder.Source, err)
	}
	for _, c := range []struct{ doc, want string }{
		{base + "forwarder:\n  source: wall\n", `forwarder.source: unknown value "wall" (allowed: polling, cdc, wal; or set OUTBOXKIT_FORWARDER_SOURCE)`},
		{"database:\n  dialect: mysql\n  dsn: u:p@tcp(h)/db\nforwarder:\n  source: wal\n", `forwarder.source: wal needs database.dialect postgres, not mysql`},
		{"database:\n  dialect: mysql\n  dsn: u:p@tcp(h)/db\nforwarder:\n  source: cdc\n", `forwarder.source: cdc needs database.dialect postgres, not mysql`},
	} {
		_, err := Parse([]byte(c.doc), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got error %v, want it to contain %q", c.doc, err, c.want)
		}
	}
}
