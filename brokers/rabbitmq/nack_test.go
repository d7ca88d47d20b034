package rabbitmq_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestNackHoldsTheKey: a queue at its length limit (2, overflow reject-publish) answers a
// publish with basic.nack. Four messages of one key in one call: the first two are confirmed,
// the third is nacked (ErrNacked, retriable) and the fourth is not sent
// (ErrEarlierMessageFailed), so the queue holds the first two in order and never a later
// message of the key after a gap.
func TestNackHoldsTheKey(t *testing.T) {
	cfg := testConfig(t)
	cfg.DisableTopology = true
	topic := "nack." + testsupport.UniqueName("t")
	declareBounded(t, cfg, topic, 2)
	t.Cleanup(func() { deleteTopic(t, cfg.URL, topic, 0) })
	pub := newPublisher(t, cfg)
	msgs := []*message.Message{keyed("a", 0), keyed("a", 1), keyed("a", 2), keyed("a", 3)}
	errs := pub.PublishEach(t.Context(), topic, msgs)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("messages within the limit failed: %v, %v", errs[0], errs[1])
	}
	if !errors.Is(errs[2], rabbitmq.ErrNacked) || !pub.Retriable(errs[2]) {
		t.Errorf("message past the limit: %v (retriable %v), want ErrNacked, retriable", errs[2], pub.Retriable(errs[2]))
	}
	if !errors.Is(errs[3], rabbitmq.ErrEarlierMessageFailed) {
		t.Errorf("message after the nacked one: %v, want ErrEarlierMessageFailed", errs[3])
	}
	got := readQueues(t, cfg, topic)
	if len(got) != 2 || header(got[0], rabbitmq.UUIDHeader) != msgs[0].UUID || header(got[1], rabbitmq.UUIDHeader) != msgs[1].UUID {
		t.Errorf("queue holds %d messages, want messages 0 and 1 in order", len(got))
	}
}

// declareBounded declares the exchange of topic and its one queue (group "", no partitions),
// holding at most maxLength messages and refusing (basic.nack) the publishes past that.
func declareBounded(t *testing.T, cfg rabbitmq.Config, topic string, maxLength int) {
	t.Helper()
	conn, err := amqp.Dial(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	args := amqp.Table{"x-queue-type": "classic", "x-max-length": int32(maxLength), "x-overflow": "reject-publish"}
	if _, err := ch.QueueDeclare(topic, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(topic, topic, topic, false, nil); err != nil {
		t.Fatal(err)
	}
}
