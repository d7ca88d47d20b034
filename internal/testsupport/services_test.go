package testsupport_test

// Smoke tests proving each test service is the real thing and reachable the way the rest of
// the test suite reaches it.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// sqlRoundTrip commits one row and rolls back another, then checks only the committed one is there.
func sqlRoundTrip(t *testing.T, db *sql.DB, placeholder func(int) string, wantVersion string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var version string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatalf("select version: %v", err)
	}
	if !strings.Contains(version, wantVersion) {
		t.Fatalf("server version %q does not contain %q", version, wantVersion)
	}
	t.Logf("server: %s", version)

	table := testsupport.UniqueName("smoke")
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY, note VARCHAR(50))"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + table) })

	insert := fmt.Sprintf("INSERT INTO %s (id, note) VALUES (%s, %s)", table, placeholder(1), placeholder(2))
	for _, tc := range []struct {
		id     int
		commit bool
	}{{1, true}, {2, false}} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		if _, err := tx.ExecContext(ctx, insert, tc.id, "row"); err != nil {
			t.Fatalf("insert: %v", err)
		}
		if tc.commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}

	rows, err := db.QueryContext(ctx, "SELECT id FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("rows after commit+rollback = %v, want [1]", ids)
	}
}

func TestPostgresTransactionRoundTrip(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	sqlRoundTrip(t, db, func(i int) string { return fmt.Sprintf("$%d", i) }, "PostgreSQL 15")
}

func TestMariaDBTransactionRoundTrip(t *testing.T) {
	db := testsupport.OpenMySQL(t)
	sqlRoundTrip(t, db, func(int) string { return "?" }, "MariaDB")
}

// kafkaSaramaConfig is watermill-kafka's default config with the protocol version raised:
// Kafka 4 dropped the request versions Sarama uses at watermill-kafka's default, 1.0.
func kafkaSaramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := kafka.DefaultSaramaSyncPublisherConfig()
	cfg.Version = version
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cfg.Producer.Retry.Max = 2
	cfg.Metadata.Retry.Max = 2
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

// watermillKafkaRoundTrip publishes three messages with watermill-kafka and consumes them back
// through a consumer group, checking payload and metadata.
func watermillKafkaRoundTrip(ctx context.Context, brokers []string, cfg *sarama.Config) error {
	topic := testsupport.UniqueName("smoke")
	logger := watermill.NopLogger{}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers: brokers, Marshaler: kafka.DefaultMarshaler{}, OverwriteSaramaConfig: cfg,
	}, logger)
	if err != nil {
		return fmt.Errorf("new publisher: %w", err)
	}
	defer pub.Close()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers: brokers, Unmarshaler: kafka.DefaultMarshaler{}, OverwriteSaramaConfig: cfg,
		ConsumerGroup: topic + "_group",
	}, logger)
	if err != nil {
		return fmt.Errorf("new subscriber: %w", err)
	}
	defer sub.Close()

	var sent []*message.Message
	for i := range 3 {
		msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("payload-%d", i)))
		msg.Metadata.Set("seq", fmt.Sprint(i))
		sent = append(sent, msg)
	}
	if err := pub.Publish(topic, sent...); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	received, err := sub.Subscribe(ctx, topic)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	got := map[string]*message.Message{}
	for len(got) < len(sent) {
		select {
		case msg := <-received:
			got[msg.UUID] = msg
			msg.Ack()
		case <-ctx.Done():
			return fmt.Errorf("received %d of %d messages: %w", len(got), len(sent), ctx.Err())
		}
	}
	for _, want := range sent {
		g := got[want.UUID]
		if g == nil {
			return fmt.Errorf("message %s not received", want.UUID)
		}
		if string(g.Payload) != string(want.Payload) || g.Metadata.Get("seq") != want.Metadata.Get("seq") {
			return fmt.Errorf("message %s: got payload %q seq %q, want %q %q", want.UUID,
				g.Payload, g.Metadata.Get("seq"), want.Payload, want.Metadata.Get("seq"))
		}
	}
	return nil
}

func TestKafkaWatermillRoundTrip(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := watermillKafkaRoundTrip(ctx, brokers, kafkaSaramaConfig(sarama.V2_8_0_0)); err != nil {
		t.Fatalf("round trip through the real Kafka with Sarama protocol 2.8: %v", err)
	}
}

// TestKafkaIsVersion4 proves the broker is a real Kafka 4: it no longer offers the old request
// versions that KIP-896 removed (Fetch below v4), which kfake still accepts. (Kafka 4.1 still advertises
// Produce and Metadata from v0, so those are not usable probes.)
//
// Measured here: with Sarama (1.43.3, watermill-kafka 3.0.6's pin, and 1.61.1, the version outboxkit uses) a produce + consumer-group
// round trip at watermill-kafka's default protocol 1.0 still works against Kafka 4.1, because
// Sarama 1.0 already speaks Produce v3 and Fetch v4+. outboxkit configures 2.8 anyway, so it never
// depends on a version the broker line is dropping.
func TestKafkaIsVersion4(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("franz-go client: %v", err)
	}
	defer client.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, client)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	minVersion := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		minVersion[k.ApiKey] = k.MinVersion
	}
	fetch := kmsg.NewPtrFetchRequest().Key()
	if minVersion[fetch] < 4 {
		t.Fatalf("broker offers Fetch from v%d: not a Kafka 4 broker", minVersion[fetch])
	}
	t.Logf("real Kafka 4: Fetch offered from v%d", minVersion[fetch])
}

func TestKfakeWatermillRoundTrip(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := watermillKafkaRoundTrip(ctx, cluster.ListenAddrs(), kafkaSaramaConfig(sarama.V2_8_0_0)); err != nil {
		t.Fatalf("round trip through kfake: %v", err)
	}
}

func TestPulsarProduceConsume(t *testing.T) {
	url := testsupport.PulsarURL(t)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("pulsar client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	topic := "persistent://public/default/" + testsupport.UniqueName("smoke")
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "smoke", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	defer producer.Close()

	id, err := producer.Send(ctx, &pulsar.ProducerMessage{
		Payload: []byte("hello"), Key: "order-1", Properties: map[string]string{"event_type": "OrderPlaced"},
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	msg, err := consumer.Receive(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if err := consumer.Ack(msg); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if string(msg.Payload()) != "hello" || msg.Key() != "order-1" || msg.Properties()["event_type"] != "OrderPlaced" {
		t.Fatalf("received payload %q key %q properties %v", msg.Payload(), msg.Key(), msg.Properties())
	}
	t.Logf("message %v round-tripped through %s", id, url)
}
