package brokerconfig_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestKafkaIsolationLevelFromYAML, on the real Kafka: kafka.isolation_level (and its
// environment override) reaches the subscribers Build makes. Behind an aborted transaction's
// record and a committed one, read_committed delivers the committed record only; the default
// delivers both.
func TestKafkaIsolationLevelFromYAML(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("isolation.yaml")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	testsupport.ProduceAbortedThenCommitted(t, brokers, topic, "aborted", "committed")

	base := fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", "))
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       []string
	}{
		{"default", base, nil, []string{"aborted", "committed"}},
		{"yaml read_committed", base + "  isolation_level: read_committed\n", nil, []string{"committed"}},
		{"env read_committed", base, map[string]string{"OUTBOXKIT_KAFKA_ISOLATION_LEVEL": "read_committed"}, []string{"committed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := brokerconfig.Parse([]byte(tc.yaml), envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			b, err := brokerconfig.Build(context.Background(), cfg, watermill.NopLogger{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			sub, err := b.NewSubscriber("")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			msgs, err := sub.Subscribe(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for !slices.Contains(got, "committed") {
				select {
				case msg := <-msgs:
					got = append(got, string(msg.Payload))
					msg.Ack()
				case <-ctx.Done():
					t.Fatalf("the committed record was not delivered within a minute; delivered: %q", got)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("delivered %q, want %q", got, tc.want)
			}
		})
	}
}

// An unknown isolation level is an error naming the value and the allowed ones.
func TestKafkaIsolationLevelErrors(t *testing.T) {
	_, err := brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [a:1]\n  isolation_level: serializable\n"), nil)
	want := `kafka.isolation_level: unknown value "serializable" (allowed: read_uncommitted, read_committed)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
	_, err = brokerconfig.Parse([]byte("broker: kafka\nkafka:\n  brokers: [a:1]\n"), envMap(map[string]string{"OUTBOXKIT_KAFKA_ISOLATION_LEVEL": "dirty"}))
	if want := `kafka.isolation_level: unknown value "dirty"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
}
