package brokerconfig_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// scenarioCase is one broker of the shared scenario: only the YAML differs.
type scenarioCase struct {
	name string
	// yaml returns the configuration; it may skip or fail the test when the broker is missing.
	yaml func(t *testing.T) string
	// brokerKey returns the broker-level message key of a consumed message, when the
	// subscriber exposes it; otherwise verifyKeys reads the topic with the broker's own client.
	brokerKey  func(msg *message.Message) (string, bool)
	verifyKeys func(t *testing.T, cfg brokerconfig.Config, topic string, want map[string]string)
}

func kafkaKey(msg *message.Message) (string, bool) {
	k, ok := wkafka.MessageKeyFromCtx(msg.Context())
	return string(k), ok
}

var scenarioCases = []scenarioCase{
	{
		name: "kafka",
		yaml: func(t *testing.T) string {
			return fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%q]\n", testsupport.KafkaBrokers(t)[0])
		},
		brokerKey: kafkaKey,
	},
	{
		name:      "kfake",
		yaml:      func(*testing.T) string { return "broker: kfake\nkfake:\n  partitions: 3" },
		brokerKey: kafkaKey,
	},
	{
		name: "pulsar",
		yaml: func(t *testing.T) string {
			return fmt.Sprintf("broker: pulsar\npulsar:\n  url: %q\n", testsupport.PulsarURL(t))
		},
		verifyKeys: pulsarKeys,
	},
	{
		name: "nats",
		yaml: func(t *testing.T) string {
			return fmt.Sprintf("broker: nats\nnats:\n  urls: [%q]\n  partitions: 4\n", testsupport.NATSURL(t))
		},
		verifyKeys: natsKeys,
	},
	rabbitMQScenario,
}

// natsKeys reads the topic's stream and checks that each message is on its key's partition
// subject (the NATS subscriber does not expose the subject).
func natsKeys(t *testing.T, cfg brokerconfig.Config, topic string, want map[string]string) {
	for _, m := range testsupport.ReadNATSStream(t, cfg.NATS.URLs[0], nats.StreamName(topic)) {
		id := m.Header.Get(nats.UUIDHeader)
		if subject := cfg.NATS.Subject(topic, want[id]); m.Subject != subject {
			t.Errorf("nats message %s: subject %s, want %s", id, m.Subject, subject)
		}
	}
}

// pulsarKeys reads the topic from the start with pulsar-client-go and checks every message's
// key and ordering key (the brokers/pulsar subscriber does not expose them).
func pulsarKeys(t *testing.T, cfg brokerconfig.Config, topic string, want map[string]string) {
	full, err := cfg.Pulsar.PublisherConfig().FullTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: cfg.Pulsar.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reader, err := client.CreateReader(apulsar.ReaderOptions{Topic: full, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range want {
		m, err := reader.Next(ctx)
		if err != nil {
			t.Fatalf("pulsar reader: %v", err)
		}
		id := m.Properties()[pulsar.UUIDProperty]
		if m.Key() != want[id] || m.OrderingKey() != want[id] {
			t.Errorf("pulsar message %s: key %q ordering key %q, want %q", id, m.Key(), m.OrderingKey(), want[id])
		}
	}
}

type received struct {
	uuid, key, brokerKey, eventType string
	seq                             int
	payload                         string
	hasBrokerKey                    bool
}

// TestScenario publishes keyed events through the configured broker, consumes them with a
// Watermill Router and checks payload, metadata, broker key and per-key order, for every broker.
func TestScenario(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, tc)
		})
	}
}

func runScenario(t *testing.T, tc scenarioCase) {
	cfg, err := brokerconfig.Parse([]byte(tc.yaml(t)), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	b, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()

	topic := testsupport.UniqueName("scenario")
	const keys, perKey = 5, 8
	total := keys * perKey

	sub, err := b.NewSubscriber(testsupport.UniqueName("group"))
	if err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan received, total*2)
	router.AddConsumerHandler("collect", topic, sub, func(msg *message.Message) error {
		seq, err := strconv.Atoi(msg.Metadata.Get("seq"))
		if err != nil {
			return fmt.Errorf("bad seq %q: %w", msg.Metadata.Get("seq"), err)
		}
		var bk string
		var ok bool
		if tc.brokerKey != nil {
			bk, ok = tc.brokerKey(msg)
		}
		got <- received{
			uuid: msg.UUID, key: msg.Metadata.Get("aggregate_id"), eventType: msg.Metadata.Get("event_type"),
			seq: seq, payload: string(msg.Payload), brokerKey: bk, hasBrokerKey: ok,
		}
		return nil
	})
	routerDone := make(chan error, 1)
	go func() { routerDone <- router.Run(ctx) }()
	defer func() {
		_ = router.Close()
		<-routerDone
	}()
	select {
	case <-router.Running():
	case <-ctx.Done():
		t.Fatal("router did not start")
	}

	// Events of every key interleaved, as a relay would send them, in two Publish calls.
	var msgs []*message.Message
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			m := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, `{"key":%d,"seq":%d}`, k, seq))
			m.Metadata.Set("aggregate_id", fmt.Sprintf("order-%d", k))
			m.Metadata.Set("seq", strconv.Itoa(seq))
			m.Metadata.Set("event_type", "order.updated")
			msgs = append(msgs, m)
		}
	}
	half := len(msgs) / 2
	for _, batch := range [][]*message.Message{msgs[:half], msgs[half:]} {
		if err := b.Publisher().Publish(topic, batch...); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}

	byUUID := map[string]received{}
	lastSeq := map[string]int{}
	for len(byUUID) < total {
		select {
		case r := <-got:
			if _, dup := byUUID[r.uuid]; dup {
				continue // at-least-once: a redelivery is allowed, order is checked on first sight
			}
			byUUID[r.uuid] = r
			if prev, ok := lastSeq[r.key]; ok && r.seq != prev+1 {
				t.Errorf("key %s: seq %d arrived after %d", r.key, r.seq, prev)
			} else if !ok && r.seq != 0 {
				t.Errorf("key %s: first event has seq %d, want 0", r.key, r.seq)
			}
			lastSeq[r.key] = r.seq
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages before the deadline", len(byUUID), total)
		}
	}
	for _, m := range msgs {
		r, ok := byUUID[m.UUID]
		if !ok {
			t.Errorf("message %s never arrived", m.UUID)
			continue
		}
		if r.payload != string(m.Payload) {
			t.Errorf("message %s: payload %q, want %q", m.UUID, r.payload, m.Payload)
		}
		if r.key != m.Metadata.Get("aggregate_id") || r.eventType != "order.updated" {
			t.Errorf("message %s: metadata aggregate_id=%q event_type=%q", m.UUID, r.key, r.eventType)
		}
		if tc.brokerKey != nil && (!r.hasBrokerKey || r.brokerKey != r.key) {
			t.Errorf("message %s: broker key %q (present %v), want %q", m.UUID, r.brokerKey, r.hasBrokerKey, r.key)
		}
	}
	if tc.verifyKeys != nil {
		want := map[string]string{}
		for _, m := range msgs {
			want[m.UUID] = m.Metadata.Get("aggregate_id")
		}
		tc.verifyKeys(t, cfg, topic, want)
	}
	if len(lastSeq) != keys {
		t.Errorf("saw %d keys, want %d", len(lastSeq), keys)
	}
}
