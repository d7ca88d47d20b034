package rabbitmq_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestQuorumQueueTypeRefused: queue_type quorum is refused by Validate, NewPublisher and
// NewSubscriber with the key and the reason: on the server this package is tested with
// (RabbitMQ 3.10), a quorum queue with single-active-consumer delivers a nacked message again
// only after the messages behind it (TestQuorumNackedMessageLosesItsPlace), so a subscriber's
// Nack would break per-key order.
func TestQuorumQueueTypeRefused(t *testing.T) {
	cfg := rabbitmq.Config{URL: "amqp://127.0.0.1:5672/", QueueType: " Quorum "}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted queue_type quorum")
	}
	for _, want := range []string{"queue_type", "quorum", "nacked", "order", "classic"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %q does not name %q", err, want)
		}
	}
	if _, err := rabbitmq.NewPublisher(cfg, testLogger()); err == nil || !strings.Contains(err.Error(), "queue_type") {
		t.Errorf("NewPublisher with queue_type quorum: %v, want the queue_type refusal", err)
	}
	if _, err := rabbitmq.NewSubscriber(cfg, testLogger()); err == nil || !strings.Contains(err.Error(), "queue_type") {
		t.Errorf("NewSubscriber with queue_type quorum: %v, want the queue_type refusal", err)
	}
	cfg.QueueType = rabbitmq.QueueTypeClassic
	if err := cfg.Validate(); err != nil {
		t.Errorf("queue_type classic: %v", err)
	}
}

// TestQuorumNackedMessageLosesItsPlace is the server behaviour TestQuorumQueueTypeRefused rests
// on, checked on the real node: with single-active-consumer and prefetch 1 (the layout and the
// subscriber of this package), a message nacked with requeue is delivered again at once on a
// classic queue, but on a quorum queue only after every message behind it, so per-key order is
// lost. If the quorum case fails on a newer server, quorum queues may be possible there: run
// Watermill's universal suite with them (TestResendOnError) before lifting the refusal.
func TestQuorumNackedMessageLosesItsPlace(t *testing.T) {
	url := testsupport.RabbitMQURL(t)
	for _, tc := range []struct{ queueType, want string }{
		{"classic", "0 0 1 2"}, // the nacked 0 first again, then the rest in order
		{"quorum", "0 1 2 0"},  // the nacked 0 after 1 and 2
	} {
		t.Run(tc.queueType, func(t *testing.T) {
			if got := nackFirstOfThree(t, url, tc.queueType); got != tc.want {
				t.Errorf("%s queue with single-active-consumer, message 0 nacked once: delivered %q, want %q", tc.queueType, got, tc.want)
			}
		})
	}
}

// nackFirstOfThree declares a queue of queueType with single-active-consumer, publishes
// messages 0, 1 and 2, consumes them with prefetch 1, nacks (requeue) the first delivery of 0,
// acks everything else, and returns the bodies in delivery order.
func nackFirstOfThree(t *testing.T, url, queueType string) string {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	queue := testsupport.UniqueName("nack_" + queueType)
	args := amqp.Table{"x-queue-type": queueType, "x-single-active-consumer": true}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		t.Fatalf("declare %s queue: %v", queueType, err)
	}
	defer func() { _, _ = ch.QueueDelete(queue, false, false, false) }()
	for _, body := range []string{"0", "1", "2"} {
		if err := ch.Publish("", queue, false, false, amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}); err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
	}
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	var got []string
	for len(got) < 4 {
		select {
		case d := <-deliveries:
			got = append(got, string(d.Body))
			if len(got) == 1 {
				err = d.Nack(false, true)
			} else {
				err = d.Ack(false)
			}
			if err != nil {
				t.Fatalf("settle %s: %v", d.Body, err)
			}
		case <-time.After(2 * time.Minute): // a bound against a hang
			t.Fatalf("after %v: no further delivery in 2 minutes", got)
		}
	}
	return strings.Join(got, " ")
}
