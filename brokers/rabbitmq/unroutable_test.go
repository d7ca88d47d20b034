package rabbitmq_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// keyOfPartition returns a key that Partition puts on partition p of n.
func keyOfPartition(t *testing.T, p, n int) string {
	t.Helper()
	for i := range 10000 {
		if key := fmt.Sprintf("key-%d", i); rabbitmq.Partition(key, n) == p {
			return key
		}
	}
	t.Fatalf("no key on partition %d of %d", p, n)
	return ""
}

// TestUnroutableIsPermanent: with the topology an operator's (disable_topology), a topic whose
// exchange has a queue bound for partition 0 of 2 only. The messages of a key on partition 1
// come back from the broker (mandatory flag): the first fails with ErrUnroutable, which the
// classifier calls permanent, the later ones of its key are held back (retriable) and nothing
// of that key is anywhere; the key on partition 0 is confirmed and in its queue, in order.
func TestUnroutableIsPermanent(t *testing.T) {
	cfg := testConfig(t)
	cfg.Partitions, cfg.DisableTopology = 2, true
	topic := "unroutable." + testsupport.UniqueName("t")
	declareOnly(t, cfg, topic, 0)
	pub := newPublisher(t, cfg)
	routed, lost := keyOfPartition(t, 0, 2), keyOfPartition(t, 1, 2)
	msgs := []*message.Message{keyed(routed, 0), keyed(lost, 1), keyed(routed, 2), keyed(lost, 3)}
	errs := pub.PublishEach(t.Context(), topic, msgs)
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("routed messages failed: %v, %v", errs[0], errs[2])
	}
	if !errors.Is(errs[1], rabbitmq.ErrUnroutable) || pub.Retriable(errs[1]) {
		t.Errorf("unroutable message: %v (retriable %v), want ErrUnroutable, permanent", errs[1], pub.Retriable(errs[1]))
	}
	if !errors.Is(errs[3], rabbitmq.ErrEarlierMessageFailed) || !pub.Retriable(errs[3]) {
		t.Errorf("later message of the unroutable key: %v, want ErrEarlierMessageFailed, retriable", errs[3])
	}
	got := readQueues(t, cfg, topic)
	if len(got) != 2 || header(got[0], rabbitmq.UUIDHeader) != msgs[0].UUID || header(got[1], rabbitmq.UUIDHeader) != msgs[2].UUID {
		t.Errorf("queue of partition 0 holds %d messages, want msgs 0 and 2 in order", len(got))
	}
}

// TestMissingExchangeIsRetriable: with disable_topology and no exchange, the broker closes the
// channel (404 NOT_FOUND): the messages fail retriably (an operator declares the exchange),
// and the publisher publishes again once it exists.
func TestMissingExchangeIsRetriable(t *testing.T) {
	cfg := testConfig(t)
	cfg.DisableTopology = true
	topic := "noexchange." + testsupport.UniqueName("t")
	pub := newPublisher(t, cfg)
	errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 0), keyed("b", 1)})
	for i, err := range errs {
		if err == nil || !pub.Retriable(err) {
			t.Errorf("message %d to a missing exchange: %v (retriable %v), want a retriable failure", i, err, pub.Retriable(err))
		}
	}
	declareOnly(t, cfg, topic, 0)
	if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 2)}); errs[0] != nil {
		t.Fatalf("publish once the exchange exists: %v", errs[0])
	}
}

// declareOnly declares the exchange of topic and the queue of partition p only, bound.
func declareOnly(t *testing.T, cfg rabbitmq.Config, topic string, p int) {
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
	queue := cfg.Queues(topic)[p]
	key := queue // the routing key of the group "" queue is its name
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "classic", "x-single-active-consumer": true}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, key, topic, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDeletedTopologyIsDeclaredAgain: the exchange and queue of a topic the publisher declared
// are deleted behind its back (an operator, a broker that lost its definitions): the next call
// fails retriably (404 NOT_FOUND closes the channel), and the one after declares them again and
// is confirmed, instead of failing until the relay dead-letters every event of the topic.
func TestDeletedTopologyIsDeclaredAgain(t *testing.T) {
	cfg := testConfig(t)
	topic := "redeclare." + testsupport.UniqueName("t")
	pub := newPublisher(t, cfg)
	if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 0)}); errs[0] != nil {
		t.Fatalf("first publish: %v", errs[0])
	}
	deleteTopic(t, cfg.URL, topic, 0)
	errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 1)})
	if errs[0] != nil && !pub.Retriable(errs[0]) {
		t.Fatalf("publish after the deletion: %v, want success or a retriable failure", errs[0])
	}
	if errs[0] == nil {
		t.Log("the first publish after the deletion was confirmed (the exchange was declared again at once)")
	}
	if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 2)}); errs[0] != nil {
		t.Fatalf("publish after a failed one: %v, want the topology declared again and the message confirmed", errs[0])
	}
	defer deleteTopic(t, cfg.URL, topic, 0)
	if got := readQueues(t, cfg, topic); len(got) == 0 {
		t.Errorf("the queue declared again holds nothing")
	}
}

// TestDeletedQueueIsDeclaredAgain: the queue of a topic the publisher declared is deleted (the
// exchange stays): the next message comes back unroutable, which a publisher managing the
// topology reports as ErrQueueMissing, retriable, not as a permanent refusal; the call after it
// declares the queue again and is confirmed.
func TestDeletedQueueIsDeclaredAgain(t *testing.T) {
	cfg := testConfig(t)
	topic := "requeue." + testsupport.UniqueName("t")
	pub := newPublisher(t, cfg)
	defer deleteTopic(t, cfg.URL, topic, 0)
	if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 0)}); errs[0] != nil {
		t.Fatalf("first publish: %v", errs[0])
	}
	conn, err := amqp.Dial(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(topic, false, false, false); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 1)})
	if !errors.Is(errs[0], rabbitmq.ErrQueueMissing) || !pub.Retriable(errs[0]) {
		t.Fatalf("publish after the queue's deletion: %v, want ErrQueueMissing, retriable", errs[0])
	}
	if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 2)}); errs[0] != nil {
		t.Fatalf("publish after it: %v, want the queue declared again and the message confirmed", errs[0])
	}
	if got := readQueues(t, cfg, topic); len(got) != 1 {
		t.Errorf("the queue declared again holds %d messages, want 1", len(got))
	}
}

// TestPublishEachNilMessagesFailWithoutPanic: nil messages share the key "", so the second one
// is held back behind the first one's failure; each gets an error naming the bad input (the
// first ErrInvalidMessage, the second ErrEarlierMessageFailed), the keyed message is confirmed.
func TestPublishEachNilMessagesFailWithoutPanic(t *testing.T) {
	cfg := testConfig(t)
	topic := "nilmessages." + testsupport.UniqueName("t")
	t.Cleanup(func() { deleteTopic(t, cfg.URL, topic, 0) })
	pub := newPublisher(t, cfg)
	errs := pub.PublishEach(t.Context(), topic, []*message.Message{nil, keyed("a", 0), nil})
	if len(errs) != 3 || !errors.Is(errs[0], rabbitmq.ErrInvalidMessage) || errs[1] != nil ||
		!errors.Is(errs[2], rabbitmq.ErrEarlierMessageFailed) {
		t.Fatalf("errs = %v, want [ErrInvalidMessage, nil, ErrEarlierMessageFailed]", errs)
	}
}
