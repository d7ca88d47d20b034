package rabbitmq_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// testLogger prints errors and info.
func testLogger() watermill.LoggerAdapter { return watermill.NewStdLogger(false, false) }

// testConfig is the configuration of the test RabbitMQ node of scripts/services.sh.
func testConfig(t *testing.T) rabbitmq.Config {
	t.Helper()
	return rabbitmq.Config{URL: testsupport.RabbitMQURL(t)}
}

func newPublisher(t *testing.T, cfg rabbitmq.Config) *rabbitmq.Publisher {
	t.Helper()
	pub, err := rabbitmq.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// keyed is a message of key (the aggregate_id metadata) with payload n.
func keyed(key string, n int) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte{byte(n)})
	msg.Metadata.Set(rabbitmq.DefaultKeyMetadata, key)
	return msg
}

// deleteTopic deletes the exchange and the group "" queues of topic (tests leave nothing behind
// on the shared node when they can).
func deleteTopic(t testing.TB, url, topic string, partitions int) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Errorf("delete topic %s: %v", topic, err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("delete topic %s: %v", topic, err)
		return
	}
	for _, q := range (rabbitmq.Config{Partitions: partitions}).Queues(topic) {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	_ = ch.ExchangeDelete(topic, false, false)
}
