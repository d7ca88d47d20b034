package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestSubscriberIsolationLevel, on the real Kafka: an aborted transaction's record, then a
// committed one, in one partition. A subscriber with IsolationLevel read_committed delivers only
// the committed record; one with the default (read_uncommitted) delivers both, which shows that
// the option is what makes the difference.
func TestSubscriberIsolationLevel(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("isolation")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	testsupport.ProduceAbortedThenCommitted(t, brokers, topic, "aborted", "committed")

	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"", []string{"aborted", "committed"}}, // the default
		{kafka.ReadUncommitted, []string{"aborted", "committed"}},
		{kafka.ReadCommitted, []string{"committed"}},
	} {
		t.Run("level="+tc.level, func(t *testing.T) {
			t.Parallel()
			sub, err := kafka.NewSubscriber(kafka.Config{Brokers: brokers, IsolationLevel: tc.level}, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if got := readUntil(t, sub, topic, "committed"); !slices.Equal(got, tc.want) {
				t.Errorf("isolation level %q delivered %q, want %q", tc.level, got, tc.want)
			}
		})
	}
}

// readUntil subscribes to topic and returns the payloads it delivers up to and including last
// (a minute at most), acking each.
func readUntil(t *testing.T, sub message.Subscriber, topic, last string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		select {
		case msg, ok := <-msgs:
			if !ok {
				t.Fatalf("the subscription closed after %q", got)
			}
			got = append(got, string(msg.Payload))
			msg.Ack()
			if string(msg.Payload) == last {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("%q not delivered within a minute; delivered: %q", last, got)
		}
	}
}

// A subscriber of a topic written in exactly_once delivery mode reads committed records only;
// an unknown level is refused with the allowed ones.
func ExampleConfig_isolationLevel() {
	cfg := kafka.Config{Brokers: []string{"127.0.0.1:9092"}, IsolationLevel: kafka.ReadCommitted}
	sc, err := cfg.SaramaConfig()
	fmt.Println(sc.Consumer.IsolationLevel == sarama.ReadCommitted, err)

	cfg.IsolationLevel = "serializable"
	fmt.Println(cfg.Validate())
	// Output:
	// true <nil>
	// isolation_level: unknown value "serializable" (allowed: read_uncommitted, read_committed)
}
