// Package outboxtest creates outbox tables on the test PostgreSQL, commits events to them, runs
// a forwarder on them and checks what a consumer received, for integration tests that relay
// events to a real broker.
package outboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// NewTable migrates a fresh outbox table named prefix_<random> on db (PostgreSQL) and drops
// it, with its companion tables, when the test ends.
func NewTable(t testing.TB, db *sql.DB, prefix string) string {
	t.Helper()
	name := testsupport.UniqueName(prefix)
	table, err := outbox.NewTable(outbox.Postgres, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{table.Events(), table.Leases(), table.Relays(), table.Migrations(), table.KeyLocks()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb + " CASCADE")
		}
		_, _ = db.Exec("DROP FUNCTION IF EXISTS " + name + "_notify()")
	})
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return name
}

// WriteEvents commits n events to topic over three keys (order-0..2) in one transaction and
// returns their ids, each with its aggregate id.
func WriteEvents(t testing.TB, db *sql.DB, table, topic string, n int) map[string]string {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // event id -> aggregate id
	events := make([]outbox.Event, n)
	for i := range events {
		id := uuid.Must(uuid.NewV7())
		key := fmt.Sprintf("order-%d", i%3)
		ids[id.String()] = key
		events[i] = outbox.Event{ID: id, Topic: topic, AggregateType: "order", AggregateID: key,
			EventType: "OrderPlaced", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(context.Background(), tx, events...); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Count runs query (a SELECT COUNT(*)) and returns its result.
func Count(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// RunForwarder runs a forwarder of cfg until the test ends (then stops it and fails the test if
// it ended with an error other than cancellation). Zero polling, lease, backoff and logger
// settings get fast test values.
func RunForwarder(t testing.TB, ctx context.Context, cfg forwarder.Config) {
	t.Helper()
	if cfg.MaxPollInterval == 0 {
		cfg.MaxPollInterval = 100 * time.Millisecond
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 2 * time.Second
	}
	if cfg.InitialInterval == 0 {
		cfg.InitialInterval = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	fwd, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fwd.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("forwarder: %v", err)
		}
	})
}

// ExpectEvents reads msgs until every event of want (event id -> aggregate id) arrived once,
// with its aggregate id in the metadata entry keyMetadata, acking each; it fails the test on an
// unexpected or repeated event, a wrong key, or ctx ending first.
func ExpectEvents(t testing.TB, ctx context.Context, msgs <-chan *message.Message, want map[string]string, keyMetadata string) {
	t.Helper()
	want = maps.Clone(want)
	for len(want) > 0 {
		select {
		case msg := <-msgs:
			id := msg.Metadata.Get(outbox.MetadataEventID)
			key, ok := want[id]
			if !ok {
				t.Errorf("unexpected or repeated event %q", id)
			} else if got := msg.Metadata.Get(keyMetadata); got != key {
				t.Errorf("event %s has key %q, want %q", id, got, key)
			}
			delete(want, id)
			msg.Ack()
		case <-ctx.Done():
			t.Fatalf("%d events never reached the consumer", len(want))
		}
	}
}
