package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/outbox"
)

// An order row and its OrderPlaced event are written in one transaction: both commit or neither.
func ExampleWriter_WriteTx() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()

	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = db.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER)")

	tx, _ := db.BeginTx(ctx, nil)
	_, _ = tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", "o-1", 42)
	event, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	if err := writer.WriteTx(ctx, tx, event); err != nil {
		fmt.Println(err)
		_ = tx.Rollback()
		return
	}
	_ = tx.Commit()

	var topic, eventType string
	_ = db.QueryRow("SELECT topic, event_type FROM "+writer.Table().Events()).Scan(&topic, &eventType)
	fmt.Println(topic, eventType)

	// Validation happens before any SQL: the transaction stays usable.
	err = writer.WriteTx(ctx, nil, outbox.Event{Topic: "orders", EventType: "OrderPlaced"})
	fmt.Println(err != nil)
	// Output:
	// orders OrderPlaced
	// true
}

// Table names are validated, never escaped: anything but a plain identifier is rejected.
func ExampleNewTable() {
	_, err := outbox.NewTable(outbox.Postgres, `events"; DROP TABLE users; --`)
	fmt.Println(err)
	// Output:
	// outbox: table name: invalid SQL identifier "events\"; DROP TABLE users; --": use letters, digits and underscores, optionally schema.table
}

// A reminder scheduled for tomorrow is written with the order; paying the order cancels it in the
// payment's transaction. Had that transaction rolled back, the reminder would have stayed scheduled.
func ExampleWriter_Cancel() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		fmt.Println(err)
		return
	}

	reminder, _ := outbox.NewJSONEvent("orders", "order", "o-1", "PaymentReminder", map[string]string{"order": "o-1"})
	reminder.DeliverAt = time.Now().Add(24 * time.Hour)
	tx, _ := db.BeginTx(ctx, nil)
	events := []outbox.Event{reminder}
	if err := writer.WriteTx(ctx, tx, events...); err != nil {
		fmt.Println(err)
		return
	}
	_ = tx.Commit()
	reminderID := events[0].ID // filled in by the writer

	tx, _ = db.BeginTx(ctx, nil)
	res, err := writer.Cancel(ctx, wsql.TxFromStdSQL(tx), reminderID, uuid.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = tx.Commit()
	fmt.Println("cancelled:", len(res.Changed), "released:", len(res.Released), "not found:", len(res.NotFound))

	var rows int
	_ = db.QueryRow("SELECT count(*) FROM " + writer.Table().Events()).Scan(&rows)
	fmt.Println("rows left:", rows)
	// Output:
	// cancelled: 1 released: 0 not found: 1
	// rows left: 0
}
