package faultinject

import (
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// small shrinks a run for the brokers whose variants CI runs besides Kafka's and Pulsar's:
// 1,500 events over 100 keys at 250 per second (6 s of writes), every fault kept.
func small(c *Config) { c.Events, c.Keys, c.Rate = 1500, 100, 250 }

// TestFaultInjectionNATS is the run with every fault against a dedicated NATS server with
// JetStream (scripts/services.sh start-nats on its own ports and state directory): 3 relays
// SIGKILLed 6 times and SIGSTOPped twice, the server restarted (its file store kept), the relays'
// database connections cut, 10 % of the transactions rolled back; no loss, no phantom, per-key
// order, one effect per event.
func TestFaultInjectionNATS(t *testing.T) {
	res := runFaultsWith(t, NATS, outbox.Postgres, true, "", 0, small)
	t.Logf("nats: %d committed, %d delivered, %d duplicates, %d broker restarts", res.Committed, res.Delivered,
		res.Duplicates, res.BrokerRestarts)
}

// TestFaultInjectionRabbitMQ is the same run against a dedicated RabbitMQ node
// (scripts/services.sh start-rabbitmq on its own ports and state directory, restarted with its
// durable queue and persistent messages kept). RabbitMQ has no deduplication: a message whose
// confirmation was lost with the connection is in the queue twice (counted as duplicates, the
// first copy checked for order).
func TestFaultInjectionRabbitMQ(t *testing.T) {
	res := runFaultsWith(t, RabbitMQ, outbox.Postgres, true, "", 0, small)
	t.Logf("rabbitmq: %d committed, %d delivered, %d duplicates, %d broker restarts", res.Committed, res.Delivered,
		res.Duplicates, res.BrokerRestarts)
}
