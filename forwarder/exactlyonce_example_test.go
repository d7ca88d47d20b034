package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Exactly-once delivery: each unit's events and a checkpoint of their rows go in one Kafka
// transaction; consumers read read_committed. (The in-process kfake cluster keeps the example
// self-contained; the tests run this against a real Kafka.)
func ExampleConfig_exactlyOnce() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	defer cluster.Close()
	dir, _ := os.MkdirTemp("", "forwarder-eo-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	tx, _ := db.BeginTx(ctx, nil)
	event, _ := outbox.NewJSONEvent("payments", "payment", "p-1", "PaymentCaptured", map[string]int{"cents": 1999})
	_ = writer.WriteTx(ctx, tx, event)
	_ = tx.Commit()

	publisher, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer publisher.Close()
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.SQLite, Publisher: publisher,
		Delivery: forwarder.ExactlyOnce, IsRetriable: kafka.Retriable, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- fwd.Run(runCtx) }()

	consumer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer consumer.Close()
	record := consumer.PollRecords(ctx, 1).Records()[0]
	fmt.Printf("key=%s value=%s\n", record.Key, record.Value)

	stop()
	fmt.Println("run:", <-done)
	// Output:
	// key=p-1 value={"cents":1999}
	// run: <nil>
}
