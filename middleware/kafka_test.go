package middleware_test

// Tests through the real Kafka broker and Watermill's Router.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/middleware"
)

// saramaConfig is watermill-kafka's default with the protocol version Kafka 4 accepts and
// consumers starting at the oldest offset, so messages published before the group joined count.
func saramaConfig() *sarama.Config {
	cfg := kafka.DefaultSaramaSyncPublisherConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

func kafkaPublisher(t *testing.T, brokers []string) message.Publisher {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers: brokers, Marshaler: kafka.DefaultMarshaler{}, OverwriteSaramaConfig: saramaConfig(),
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("kafka publisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func kafkaSubscriber(t *testing.T, brokers []string, group string) message.Subscriber {
	t.Helper()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers: brokers, Unmarshaler: kafka.DefaultMarshaler{}, OverwriteSaramaConfig: saramaConfig(),
		ConsumerGroup: group, NackResendSleep: 10 * time.Millisecond,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("kafka subscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// callCounter counts handler calls per key.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *callCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// TestInboxOverKafka delivers one event twice (two broker messages with the same event id) and a
// second event whose handler fails after writing its effect, so the Router nacks it and Kafka
// redelivers it. Each event must have exactly one effect in the database.
func TestInboxOverKafka(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, d := range databases()[:2] { // the server databases; SQLite is covered by the other tests
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, d)
			topic := testsupport.UniqueName("inbox_events")
			pub := kafkaPublisher(t, brokers)
			sub := kafkaSubscriber(t, brokers, topic+"_group")

			router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan outcome, 20)
			router.AddMiddleware(observe(out))
			var calls callCounter
			eventA, eventB := "A-"+watermill.NewUUID(), "B-"+watermill.NewUUID()
			router.AddConsumerHandler("inbox_handler", topic, sub, f.inbox.ConsumerHandler(
				func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
					id := msg.Metadata.Get("event_id")
					n := calls.inc(id)
					if err := f.addEffect(ctx, tx, msg); err != nil {
						return err
					}
					if id == eventB && n == 1 {
						return errors.New("failed after the effect")
					}
					return nil
				}))
			runRouter(t, router)

			m1, m2, m3 := eventMsg(eventA, "a-1"), eventMsg(eventA, "a-2 (redelivery)"), eventMsg(eventB, "b")
			if err := pub.Publish(topic, m1, m2, m3); err != nil {
				t.Fatalf("publish: %v", err)
			}
			acked := map[string]bool{}
			var nacked int
			for len(acked) < 3 {
				o := waitOutcome(t, out)
				if o.err != nil {
					nacked++
					continue
				}
				acked[o.uuid] = true
			}
			if nacked != 1 {
				t.Fatalf("%d deliveries nacked, want 1 (event B's first attempt)", nacked)
			}
			if a, b := calls.get(eventA), calls.get(eventB); a != 1 || b != 2 {
				t.Fatalf("handler calls: event A %d (want 1), event B %d (want 2)", a, b)
			}
			for _, id := range []string{eventA, eventB} {
				if got := f.count(t, f.effects, id); got != 1 {
					t.Fatalf("event %s has %d effects in the database, want 1", id, got)
				}
			}
			if got, want := f.inbox.Stats(), (middleware.InboxStats{Processed: 2, Duplicates: 1}); got != want {
				t.Fatalf("stats %+v, want %+v", got, want)
			}
		})
	}
}

// TestRetryThenPoisonOverKafka runs RetryThenPoison on a Router consuming from Kafka: a handler
// that always fails is called MaxRetries+1 times and its message lands on the poison topic with
// Watermill's poison metadata and the original payload; a handler that succeeds on its second
// attempt is acked and never poisoned.
func TestRetryThenPoisonOverKafka(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	const maxRetries = 3
	topic := testsupport.UniqueName("orders")
	poisonTopic := topic + "_poison"
	pub := newRecordingPublisher(kafkaPublisher(t, brokers))
	sub := kafkaSubscriber(t, brokers, topic+"_group")

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 20)
	mw, err := middleware.RetryThenPoison(fastRetry(pub, poisonTopic, maxRetries))
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(observe(out), mw)
	var calls callCounter
	router.AddConsumerHandler("orders_handler", topic, sub, func(msg *message.Message) error {
		n := calls.inc(string(msg.Payload))
		switch string(msg.Payload) {
		case "always-fails":
			return fmt.Errorf("order %s: price service unavailable (attempt %d)", msg.Metadata.Get("event_id"), n)
		case "flaky":
			if n == 1 {
				return errors.New("flaky: first attempt fails")
			}
		}
		return nil
	})
	runRouter(t, router)

	bad, flaky := eventMsg("evt-bad", "always-fails"), eventMsg("evt-flaky", "flaky")
	bad.Metadata.Set("tenant", "acme")
	if err := pub.Publish(topic, bad, flaky); err != nil {
		t.Fatalf("publish: %v", err)
	}
	for range 2 {
		if o := waitOutcome(t, out); o.err != nil {
			t.Fatalf("delivery of %q ended with error %v, want acked (after success or poisoning)", o.payload, o.err)
		}
	}
	if got := calls.get("always-fails"); got != maxRetries+1 {
		t.Fatalf("failing handler called %d times, want MaxRetries+1 = %d", got, maxRetries+1)
	}
	if got := calls.get("flaky"); got != 2 {
		t.Fatalf("flaky handler called %d times, want 2", got)
	}
	if got := pub.on(poisonTopic); len(got) != 1 || got[0].UUID != bad.UUID {
		t.Fatalf("published to the poison topic: %d messages, want only the always-failing one", len(got))
	}

	// Read the poison topic back from Kafka.
	poisonSub := kafkaSubscriber(t, brokers, poisonTopic+"_reader")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs, err := poisonSub.Subscribe(ctx, poisonTopic)
	if err != nil {
		t.Fatalf("subscribe to the poison topic: %v", err)
	}
	var got *message.Message
	select {
	case got = <-msgs:
		got.Ack()
	case <-ctx.Done():
		t.Fatal("nothing on the poison topic within 60s")
	}
	if got.UUID != bad.UUID || string(got.Payload) != "always-fails" {
		t.Fatalf("poisoned message %s with payload %q, want %s with the original payload", got.UUID, got.Payload, bad.UUID)
	}
	reason := got.Metadata.Get(wmmiddleware.ReasonForPoisonedKey)
	if !strings.Contains(reason, "price service unavailable (attempt 4)") {
		t.Fatalf("poison reason %q, want the last attempt's error", reason)
	}
	for key, want := range map[string]string{
		wmmiddleware.PoisonedTopicKey:   topic,
		wmmiddleware.PoisonedHandlerKey: "orders_handler",
		"event_id":                      "evt-bad",
		"tenant":                        "acme",
	} {
		if v := got.Metadata.Get(key); v != want {
			t.Errorf("poisoned message metadata %s = %q, want %q", key, v, want)
		}
	}
	if got.Metadata.Get(wmmiddleware.PoisonedSubscriberKey) == "" {
		t.Errorf("poisoned message has no %s", wmmiddleware.PoisonedSubscriberKey)
	}
}
