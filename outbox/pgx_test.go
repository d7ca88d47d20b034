package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestNativePgxPaths: WritePgx and QueuePgx commit and roll back with a native pgx transaction.
func TestNativePgxPaths(t *testing.T) {
	tg := newTarget(t, outbox.Postgres)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	insert := fmt.Sprintf("INSERT INTO %s (id, total) VALUES ($1, $2)", tg.business)

	write := func(orderID string, queue, commit bool) outbox.Event {
		t.Helper()
		e := orderEvent(orderID, 1)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if queue {
			batch := &pgx.Batch{}
			batch.Queue(insert, orderID, 1)
			if err := tg.writer.QueuePgx(batch, e); err != nil {
				t.Fatal(err)
			}
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := tx.Exec(ctx, insert, orderID, 1); err != nil {
				t.Fatal(err)
			}
			if err := tg.writer.WritePgx(ctx, tx, e); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	committed := []outbox.Event{write("w1", false, true), write("q1", true, true)}
	rolledBack := []outbox.Event{write("w2", false, false), write("q2", true, false)}
	ids := tg.eventIDs(t)
	if len(ids) != 2 {
		t.Fatalf("%d events stored, want the 2 committed", len(ids))
	}
	for _, e := range committed {
		if !ids[e.ID.String()] {
			t.Fatalf("committed event %s missing", e.ID)
		}
	}
	for _, e := range rolledBack {
		if ids[e.ID.String()] {
			t.Fatalf("rolled-back event %s stored", e.ID)
		}
	}

	// QueuePgx validates before queueing anything and refuses other dialects.
	batch := &pgx.Batch{}
	if err := tg.writer.QueuePgx(batch, outbox.Event{Topic: "t"}); !errors.Is(err, outbox.ErrInvalidEvent) || batch.Len() != 0 {
		t.Fatalf("invalid event: %v (queued %d)", err, batch.Len())
	}
	mysqlWriter, err := outbox.NewWriter(outbox.Config{Dialect: outbox.MySQL})
	if err != nil {
		t.Fatal(err)
	}
	if err := mysqlWriter.QueuePgx(batch, orderEvent("x", 1)); err == nil || !strings.Contains(err.Error(), "needs the postgres dialect") {
		t.Fatalf("QueuePgx on a mysql writer: %v", err)
	}
}
