package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/outbox"
)

// With Mode: outbox.ModeWAL the writer emits events as transactional logical decoding messages
// for the wal source instead of rows (docs/wal.md). Queued into the business statement's pgx
// batch, the emit shares its round trip; it commits or rolls back with the transaction, and it
// fails while the writer's slot, which the wal relay reads, is missing or invalidated.
func ExampleModeWAL() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://app@localhost/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Mode: outbox.ModeWAL, WALSlot: "orders_wal"})
	if err != nil {
		fmt.Println(err)
		return
	}
	event, err := outbox.NewJSONEvent("orders.events", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue("INSERT INTO orders (id, total) VALUES ($1, $2)", "o-1", 42)
		if err := writer.QueuePgx(batch, event); err != nil {
			return err
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	fmt.Println(err)
}

// A relay reads the events back from a message's content with DecodeWALEnvelope.
func ExampleDecodeWALEnvelope() {
	table, _ := outbox.NewTable(outbox.Postgres, "App.Orders_Outbox")
	event := outbox.Event{
		ID: uuid.MustParse("0190a5c4-0000-7d3a-9a53-3c8e2d3f1b2b"), Topic: "orders.events", AggregateType: "order",
		AggregateID: "o-1", EventType: "OrderPlaced", Payload: []byte(`{"total":42}`),
		CreatedAt: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC),
	}
	content, _ := outbox.AppendWALEnvelope(nil, []outbox.Event{event})
	events, _ := outbox.DecodeWALEnvelope(content)
	fmt.Println(table.WALPrefix(), table.WALEmitFunction())
	fmt.Println(len(content), events[0].AggregateID, events[0].EventType, string(events[0].Payload), events[0].CreatedAt)
	// Output:
	// outboxkit:app.orders_outbox App.Orders_Outbox_emit
	// 82 o-1 OrderPlaced {"total":42} 2026-12-07 12:00:00 +0000 UTC
}

// CreateWALSlot creates and registers the slot the wal relay reads (once, at deployment, as
// outboxkit migrate --wal-slot does), so that writers may emit from the start. It never
// re-creates a registered slot that was lost: that is outbox.ErrWALSlotLost, and an operator's
// ResetWALSlot.
func ExampleCreateWALSlot() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	table, _ := outbox.NewTable(outbox.Postgres, outbox.DefaultTable)
	if err := outbox.Migrate(ctx, db, table); err != nil {
		fmt.Println(err)
		return
	}
	created, err := outbox.CreateWALSlot(ctx, db, table, "orders_wal")
	if errors.Is(err, outbox.ErrWALSlotLost) {
		fmt.Println("the slot was lost; see the runbook in docs/cdc.md:", err)
		return
	}
	fmt.Println(created, err)
}
