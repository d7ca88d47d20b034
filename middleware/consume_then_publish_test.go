package middleware_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestConsumeThenPublishInOneTransaction: the inbox row, the handler's effect and the follow-up
// event written to the outbox commit together. A handler failing after writing both leaves
// nothing behind; the redelivery then has one effect and produces one follow-up event, and a
// further duplicate produces neither.
func TestConsumeThenPublishInOneTransaction(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	ctx := context.Background()
	prefix := testsupport.UniqueName("ctp")
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: prefix + "_outbox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		t.Fatal(err)
	}
	inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: outbox.Postgres,
		Table: prefix + "_inbox", ConsumerName: "shipping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	shipments := prefix + "_shipments"
	if _, err := db.Exec("CREATE TABLE " + shipments + " (order_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tbl := writer.Table()
		for _, n := range []string{shipments, prefix + "_inbox", prefix + "_inbox_migrations", tbl.Events(), tbl.Leases(), tbl.Relays(), tbl.Migrations()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	})

	failAfterWrites := true
	handler := inbox.ConsumerHandler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
		orderID := msg.Metadata.Get(outbox.MetadataAggregateID)
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+shipments+" (order_id) VALUES ($1)", orderID); err != nil {
			return err
		}
		shipped, err := outbox.NewJSONEvent("shipments", "order", orderID, "OrderShipped", map[string]string{"order": orderID})
		if err != nil {
			return err
		}
		if err := writer.WriteTx(ctx, tx, shipped); err != nil {
			return err
		}
		if failAfterWrites {
			return errors.New("crash after the effect and the follow-up event")
		}
		return nil
	})

	placed, err := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	delivery := func() error {
		msg := placed.ToMessage()
		msg.SetContext(ctx)
		return handler(msg)
	}
	count := func(table string) int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if err := delivery(); err == nil {
		t.Fatal("the failing handler's error was swallowed")
	}
	if s, o := count(shipments), count(writer.Table().Events()); s != 0 || o != 0 {
		t.Fatalf("after a failed handling: %d shipments, %d outbox events; want none", s, o)
	}
	failAfterWrites = false
	for range 2 { // the redelivery, then a duplicate
		if err := delivery(); err != nil {
			t.Fatal(err)
		}
	}
	if s, o := count(shipments), count(writer.Table().Events()); s != 1 || o != 1 {
		t.Fatalf("after redelivery and a duplicate: %d shipments, %d outbox events; want 1 and 1", s, o)
	}
}
