package rabbitmq_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestOutcomeConformance runs forwarder/outcometest against the RabbitMQ node of
// scripts/services.sh, with a queue per topic and with 8 key-hash queues. The publisher's
// max_message_size is 64 KiB, so the suite's 100 KiB message is refused before it is sent.
// Refusals besides size: the reserved UUID header set to another value, and a metadata entry
// whose name is longer than an AMQP field name.
func TestOutcomeConformance(t *testing.T) {
	url := testConfig(t).URL
	for _, v := range []struct {
		name       string
		partitions int
	}{{"QueuePerTopic", 0}, {"Partitions8", 8}} {
		t.Run(v.name, func(t *testing.T) {
			cfg := rabbitmq.Config{URL: url, Partitions: v.partitions, MaxMessageSize: 64 << 10}
			newPublisher := func(t *testing.T) outcometest.Publisher {
				pub, err := rabbitmq.NewPublisher(cfg, testLogger())
				if err != nil {
					t.Fatalf("new publisher: %v", err)
				}
				return pub
			}
			features := outcometest.Features{OversizedPayload: 100 << 10, Refusals: []outcometest.Refusal{
				{Name: "ReservedUUIDHeader", Spoil: func(msg *message.Message) { msg.Metadata.Set(rabbitmq.UUIDHeader, "not-"+msg.UUID) }},
				{Name: "LongHeaderName", Spoil: func(msg *message.Message) { msg.Metadata.Set(string(make([]byte, 300)), "x") }},
			}}
			outcometest.TestOutcomePublisher(t, features, newPublisher, rabbitBroker(cfg))
		})
	}
}

// rabbitBroker is the outcometest.Broker of a RabbitMQ node: a new topic (declared by the
// first publish), read back from its queues in queue order.
func rabbitBroker(cfg rabbitmq.Config) outcometest.Broker {
	return outcometest.Broker{
		NewTopic: func(*testing.T) string { return "outcometest." + testsupport.UniqueName("t") },
		ReadTopic: func(t *testing.T, topic string) []outcometest.Received {
			t.Helper()
			var got []outcometest.Received
			for _, m := range readQueues(t, cfg, topic) {
				got = append(got, outcometest.Received{UUID: header(m, rabbitmq.UUIDHeader), Key: header(m, rabbitmq.DefaultKeyMetadata)})
			}
			return got
		},
	}
}

// readQueues returns the messages in the queues of topic (group ""), queue by queue in queue
// order, without taking them: they are got unacknowledged and requeued when the channel closes.
// A topic nothing was published to has no queue: nothing.
func readQueues(t *testing.T, cfg rabbitmq.Config, topic string) []amqp.Delivery {
	t.Helper()
	conn, err := amqp.Dial(cfg.URL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close()
	var out []amqp.Delivery
	for _, queue := range cfg.Queues(topic) {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, ok, err := ch.Get(queue, false)
			if err != nil {
				if e := (*amqp.Error)(nil); errors.As(err, &e) && e.Code == amqp.NotFound {
					break // never declared: nothing was published
				}
				t.Fatalf("get from %s: %v", queue, err)
			}
			if !ok {
				break
			}
			out = append(out, m)
		}
		_ = ch.Close()
	}
	return out
}

func header(m amqp.Delivery, name string) string {
	v, _ := m.Headers[name].(string)
	return v
}
