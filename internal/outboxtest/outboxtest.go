// Package outboxtest creates outbox tables on the test PostgreSQL and commits events to them,
// for integration tests that relay those events to a real broker.
package outboxtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/google/uuid"

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
