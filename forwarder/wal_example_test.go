package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The wal source (docs/wal.md): the writer emits the event as a logical decoding message in the
// business transaction (outbox.ModeWAL, no row), and the relay streams it from the slot straight
// to Kafka (here an in-process kfake cluster). It needs PostgreSQL 14+ with wal_level=logical and
// a role with REPLICATION (OUTBOXKIT_TEST_PG_DSN, or the test services' default).
func ExampleConfig_sourceWAL() {
	dsn := os.Getenv(testsupport.EnvPostgresDSN)
	if dsn == "" {
		dsn = testsupport.DefaultPostgresDSN
	}
	db, _ := sql.Open("pgx", dsn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const table, slot = "example_wal_events", "example_wal_slot"

	// The table (parked keys' events go there) and the slot, registered so that writers may emit.
	tbl, _ := outbox.NewTable(outbox.Postgres, table)
	if err := outbox.Migrate(ctx, db, tbl); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { // the example's own objects
		_, _ = db.Exec("SELECT pg_drop_replication_slot($1)", slot)
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + slot)
		for _, name := range tbl.Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + name + " CASCADE")
		}
	}()
	if _, err := outbox.CreateWALSlot(ctx, db, tbl, slot); err != nil {
		fmt.Println(err)
		return
	}

	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	defer cluster.Close()
	publisher, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer publisher.Close()
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: table, Publisher: publisher,
		Source: forwarder.SourceWAL, WAL: forwarder.WALConfig{DSN: dsn, Slot: slot},
		IsRetriable: kafka.Retriable, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- fwd.Run(runCtx) }()

	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table, Mode: outbox.ModeWAL, WALSlot: slot})
	tx, _ := db.BeginTx(ctx, nil)
	event, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	if err := writer.WriteTx(ctx, tx, event); err != nil {
		fmt.Println(err)
		return
	}
	_ = tx.Commit()

	consumer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	record := consumer.PollRecords(ctx, 1).Records()[0]
	var rows int
	_ = db.QueryRow("SELECT count(*) FROM " + table).Scan(&rows)
	fmt.Printf("key=%s value=%s rows in the table=%d\n", record.Key, record.Value, rows)

	stop()
	fmt.Println("run:", <-done)
	// Output:
	// key=o-1 value={"total":42} rows in the table=0
	// run: <nil>
}
