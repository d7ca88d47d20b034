package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// A forwarder relays committed outbox events to Kafka (here an in-process kfake cluster) with the
// aggregate id as the message key.
func ExampleForwarder_Run() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	defer cluster.Close()
	dir, _ := os.MkdirTemp("", "forwarder-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	tx, _ := db.BeginTx(ctx, nil)
	event, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	_ = writer.WriteTx(ctx, tx, event)
	_ = tx.Commit()

	publisher, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer publisher.Close()
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.SQLite, Publisher: publisher,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- fwd.Run(runCtx) }()

	consumer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	record := consumer.PollRecords(ctx, 1).Records()[0]
	fmt.Printf("key=%s value=%s\n", record.Key, record.Value)

	stop()
	fmt.Println("run:", <-done)
	// Output:
	// key=o-1 value={"total":42}
	// run: <nil>
}

// Bounded batches and outage-proof retries: MaxBatchBytes caps the payload bytes a worker holds
// at once beside BatchSize, and UnlimitedRetries keeps retrying retriable errors (a broker
// outage, a missing ACL) instead of dead-lettering after MaxAttempts. Validate names bad values.
func ExampleConfig_Validate() {
	db, _ := sql.Open("sqlite", "file::memory:")
	defer db.Close()
	cfg := forwarder.Config{
		DB: db, Dialect: outbox.SQLite, Publisher: noopPublisher{},
		BatchSize: 500, MaxBatchBytes: -1, UnlimitedRetries: true,
	}
	_, err := forwarder.New(cfg)
	fmt.Println(err)
	cfg.MaxBatchBytes = 8 << 20
	_, err = forwarder.New(cfg)
	fmt.Println(err)
	// Output:
	// forwarder: invalid config: MaxBatchBytes must be positive, got -1
	// <nil>
}

// noopPublisher stands in for a broker in examples that never publish.
type noopPublisher struct{}

func (noopPublisher) Publish(string, ...*message.Message) error { return nil }
func (noopPublisher) Close() error                              { return nil }
