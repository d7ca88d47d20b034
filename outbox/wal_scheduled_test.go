package outbox_test

import (
	"context"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALWriterKeepsScheduledEventsAsRows: in ModeWAL a scheduled event is a row of the table
// with status scheduled and its deliver_at, written in the caller's transaction, on every write
// path (WriteTx, QueuePgx, the Watermill publisher with components/delay); the other events of
// the same call are emitted as messages and get no row; a rolled-back transaction leaves neither.
func TestWALWriterKeepsScheduledEventsAsRows(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walsch"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	scheduled := func(key string) outbox.Event { e := walEvent(key); e.DeliverAt = at; return e }

	// database/sql, committed: one emitted, one scheduled; and a rolled-back scheduled one.
	std := []outbox.Event{walEvent("s-1"), scheduled("s-1")}
	rolledBack := scheduled("r-1")
	for _, commit := range []bool{true, false} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := std
		if !commit {
			events = []outbox.Event{rolledBack}
		}
		if err := tg.writer.WriteTx(ctx, tx, events...); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// pgx, queued in a batch: one scheduled, one emitted.
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	queued := []outbox.Event{scheduled("p-1"), walEvent("p-1")}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := &pgx.Batch{}
	if err := tg.writer.QueuePgx(batch, queued...); err != nil {
		t.Fatal(err)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The Watermill publisher: a message delayed with components/delay.
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := tg.writer.Publisher(wsql.TxFromStdSQL(stx))
	if err != nil {
		t.Fatal(err)
	}
	delayed := walEvent("m-1").ToMessage()
	delay.Message(delayed, delay.Until(at))
	if err := pub.Publish("orders.events", delayed); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}

	emitted := walEvents(t, slot.messages(t, tg.writer.Table().WALPrefix()))
	if len(emitted) != 2 || emitted[0].ID != std[0].ID || emitted[1].ID != queued[1].ID {
		t.Fatalf("emitted %d events, want the two unscheduled ones (%s, %s)", len(emitted), std[0].ID, queued[1].ID)
	}
	rows, err := db.Query("SELECT event_id::text, status, deliver_at FROM " + tg.writer.Table().Events() + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	want := []string{std[1].ID.String(), queued[0].ID.String(), delayed.UUID}
	var got []string
	for rows.Next() {
		var id string
		var status int
		var deliverAt time.Time
		if err := rows.Scan(&id, &status, &deliverAt); err != nil {
			t.Fatal(err)
		}
		// components/delay keeps whole seconds.
		if status != 4 || !deliverAt.Truncate(time.Second).Equal(at.Truncate(time.Second)) {
			t.Errorf("row %s: status %d deliver_at %s, want 4 and %s", id, status, deliverAt, at)
		}
		got = append(got, id)
	}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want the scheduled events %v (not the rolled-back %s)", got, want, rolledBack.ID)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
	// Writer.Cancel finds them in ModeWAL; an emitted event has no row.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	canceltx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tg.writer.Cancel(ctx, wsql.TxFromStdSQL(canceltx), std[1].ID, std[0].ID)
	if err != nil || len(res.Changed) != 1 || res.Changed[0] != std[1].ID || len(res.NotFound) != 1 || res.NotFound[0] != std[0].ID {
		t.Fatalf("cancel in ModeWAL: %+v, %v; want %s cancelled and the emitted %s not found", res, err, std[1].ID, std[0].ID)
	}
	if err := canceltx.Commit(); err != nil {
		t.Fatal(err)
	}
}
