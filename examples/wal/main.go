// Command wal shows the wal source end to end on PostgreSQL: events written as transactional
// logical decoding messages (outbox.ModeWAL, no outbox row), streamed from a replication slot by
// outboxkit's relay straight to an in-process Kafka-protocol cluster (franz-go's kfake).
//
//	eval "$(bash scripts/services.sh env)"   # or pass -dsn
//	go run ./examples/wal
//
// It needs PostgreSQL 14+ with wal_level=logical and a role with REPLICATION (the test services'
// PostgreSQL is one). Each run uses its own table, slot and publication, named with a random
// suffix, and drops them at the end, also on error. Three orders are placed; the transaction of
// o-2 is rolled back, so its event was never in the WAL and never reaches the broker.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx database/sql driver, registered as "pgx"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// envDSN is the variable the project's tests read the PostgreSQL URL from.
const envDSN = "OUTBOXKIT_TEST_PG_DSN"

// defaultDSN is the test services' PostgreSQL (scripts/services.sh).
const defaultDSN = "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable"

// topic receives the order events.
const topic = "orders"

// runTimeout bounds the whole demo, so a broken setup fails instead of hanging.
const runTimeout = 90 * time.Second

func main() {
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		dsn = defaultDSN
	}
	flag.StringVar(&dsn, "dsn", dsn, "PostgreSQL URL (wal_level=logical, a role with REPLICATION); default $"+envDSN)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "wal:", err)
		os.Exit(1)
	}
}

// order is one order of the demo: committed, or rolled back.
type order struct {
	id     string
	total  int
	commit bool
}

var orders = []order{{"o-1", 4200, true}, {"o-2", 1999, false}, {"o-3", 750, true}}

// run executes the demo on the PostgreSQL at dsn and writes its story to out.
func run(ctx context.Context, out io.Writer, dsn string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to PostgreSQL (-dsn or $%s): %w", envDSN, err)
	}

	// 1. This run's names, the outbox tables (parked keys' events go to the table) and the slot.
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "wal_example_" + hex.EncodeToString(suffix)
	table, slot := name+"_events", name
	tbl, err := outbox.NewTable(outbox.Postgres, table)
	if err != nil {
		return fmt.Errorf("outbox table: %w", err)
	}
	fmt.Fprintf(out, "outboxkit wal example: table %s, slot %s\n", table, slot)
	defer func() { err = errors.Join(err, cleanup(out, db, tbl, slot)) }()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+"_orders (id text PRIMARY KEY, total_cents int NOT NULL)"); err != nil {
		return fmt.Errorf("create the orders table: %w", err)
	}
	if err := outbox.Migrate(ctx, db, tbl); err != nil {
		return fmt.Errorf("migrate %s: %w", table, err)
	}
	if _, err := outbox.CreateWALSlot(ctx, db, tbl, slot); err != nil {
		return fmt.Errorf("create the wal slot: %w", err)
	}
	fmt.Fprintf(out, "slot %s created and registered: ModeWAL writers may emit\n", slot)

	// 2. The broker and the relay: the wal source streams the slot to Kafka.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		return fmt.Errorf("kfake cluster: %w", err)
	}
	defer cluster.Close()
	publisher, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		return fmt.Errorf("kafka publisher: %w", err)
	}
	defer publisher.Close()
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: table, Publisher: publisher,
		Source: forwarder.SourceWAL, WAL: forwarder.WALConfig{DSN: dsn, Slot: slot},
		IsRetriable: kafka.Retriable, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fwd.Run(runCtx) }()
	defer func() { // the slot can only be dropped once the relay let go of it
		stop()
		if runErr := <-done; runErr != nil {
			err = errors.Join(err, fmt.Errorf("relay: %w", runErr))
		}
	}()
	fmt.Fprintln(out, "relay running: source wal -> topic", topic)

	// 3. The application: each order and its event in one transaction, o-2's rolled back.
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table, Mode: outbox.ModeWAL, WALSlot: slot})
	if err != nil {
		return fmt.Errorf("outbox writer: %w", err)
	}
	for _, o := range orders {
		if err := placeOrder(ctx, db, writer, name+"_orders", o); err != nil {
			return err
		}
		if o.commit {
			fmt.Fprintf(out, "order %s committed with its OrderPlaced event (a WAL message, no row)\n", o.id)
		} else {
			fmt.Fprintf(out, "order %s rolled back: its event was never in the WAL\n", o.id)
		}
	}

	// 4. The consumer reads the topic until both committed orders arrived.
	if err := consume(ctx, out, cluster.ListenAddrs()); err != nil {
		return err
	}
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		return fmt.Errorf("count the rows of %s: %w", table, err)
	}
	fmt.Fprintf(out, "rows in the outbox table %s: %d\n", table, rows)
	return nil
}

// placeOrder inserts o into the orders table and writes its OrderPlaced event in one transaction,
// committed or rolled back as o says.
func placeOrder(ctx context.Context, db *sql.DB, w *outbox.Writer, ordersTable string, o order) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("order %s: begin: %w", o.id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+ordersTable+" (id, total_cents) VALUES ($1, $2)", o.id, o.total); err != nil {
		return fmt.Errorf("order %s: insert: %w", o.id, err)
	}
	event, err := outbox.NewJSONEvent(topic, "order", o.id, "OrderPlaced", map[string]any{"order_id": o.id, "total_cents": o.total})
	if err != nil {
		return fmt.Errorf("order %s: event: %w", o.id, err)
	}
	if err := w.WriteTx(ctx, tx, event); err != nil {
		return fmt.Errorf("order %s: write event: %w", o.id, err)
	}
	if !o.commit {
		return tx.Rollback()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("order %s: commit: %w", o.id, err)
	}
	return nil
}

// consume reads the topic from its start until every committed order arrived; an event of an
// order never committed is an error.
func consume(ctx context.Context, out io.Writer, brokers []string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	defer client.Close()
	want := map[string]bool{}
	for _, o := range orders {
		if o.commit {
			want[o.id] = true
		}
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumer saw %d of %d orders: %w", len(seen), len(want), ctx.Err())
		}
		var recErr error
		fetches.EachRecord(func(r *kgo.Record) {
			key := string(r.Key)
			if !want[key] {
				recErr = errors.Join(recErr, fmt.Errorf("event for order %s, which was never committed", key))
				return
			}
			if !seen[key] {
				seen[key] = true
				fmt.Fprintf(out, "broker delivered: key %s value %s\n", key, r.Value)
			}
		})
		if recErr != nil {
			return recErr
		}
	}
	return nil
}

// cleanup drops the run's slot, its publication and its tables, with a context of its own so
// that it also runs after the demo's timeout.
func cleanup(out io.Writer, db *sql.DB, tbl outbox.Table, slot string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if err := outbox.DropWALSlot(ctx, db, tbl, slot); err != nil {
		// DropWALSlot reads the register first: drop the slot and publication directly if it is gone.
		_, e1 := db.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
		_, e2 := db.ExecContext(ctx, `DROP PUBLICATION IF EXISTS "`+slot+`"`)
		if e1 != nil || e2 != nil {
			errs = append(errs, err, e1, e2)
		}
	}
	for _, name := range append(tbl.Tables(), slot+"_orders") {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE"); err != nil {
			errs = append(errs, fmt.Errorf("drop table %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	fmt.Fprintf(out, "slot %s, its publication and the run's tables dropped\n", slot)
	return nil
}
