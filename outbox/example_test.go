package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

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
