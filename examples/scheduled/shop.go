package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// shop is the application: an orders table and the outbox, written in the same transactions.
type shop struct {
	db     *sql.DB
	writer *outbox.Writer
}

// placedOrder is what placing an order wrote: its two events and when the deadline is due.
type placedOrder struct {
	placedEvent, deadlineEvent uuid.UUID
	dueAt                      time.Time
}

// newShop creates the orders table, then the outbox table (and the relay's tables).
func newShop(ctx context.Context, db *sql.DB) (*shop, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create table orders: %w", err)
	}
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		return nil, fmt.Errorf("migrate outbox: %w", err)
	}
	return &shop{db: db, writer: writer}, nil
}

// place saves an unpaid order with its OrderPlaced event and its PaymentDeadline event, due at
// dueAt, in one transaction.
func (s *shop) place(ctx context.Context, id string, dueAt time.Time) (placedOrder, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return placedOrder{}, fmt.Errorf("order %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, status) VALUES (?, 'unpaid')", id); err != nil {
		return placedOrder{}, fmt.Errorf("order %s: insert: %w", id, err)
	}
	payload := map[string]string{"order_id": id}
	placed, err := outbox.NewJSONEvent(topic, "order", id, "OrderPlaced", payload)
	if err != nil {
		return placedOrder{}, fmt.Errorf("order %s: event: %w", id, err)
	}
	deadline, err := outbox.NewJSONEvent(topic, "order", id, "PaymentDeadline", payload)
	if err != nil {
		return placedOrder{}, fmt.Errorf("order %s: event: %w", id, err)
	}
	deadline.DeliverAt = dueAt // published at or after this time, unless cancelled before
	events := []outbox.Event{placed, deadline}
	if err := s.writer.WriteTx(ctx, tx, events...); err != nil { // fills in the event ids
		return placedOrder{}, fmt.Errorf("order %s: write events: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return placedOrder{}, fmt.Errorf("order %s: commit: %w", id, err)
	}
	return placedOrder{placedEvent: events[0].ID, deadlineEvent: events[1].ID, dueAt: dueAt}, nil
}

// pay marks the order paid and cancels its PaymentDeadline event, in one transaction.
func (s *shop) pay(ctx context.Context, id string, deadlineEvent uuid.UUID) (outbox.ScheduleResult, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("pay %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'paid' WHERE id = ? AND status = 'unpaid'", id); err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("pay %s: %w", id, err)
	}
	res, err := s.writer.Cancel(ctx, wsql.TxFromStdSQL(tx), deadlineEvent)
	if err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("pay %s: cancel its deadline: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("pay %s: commit: %w", id, err)
	}
	return res, nil
}

// cancelIfUnpaid is the consumer's reaction to a PaymentDeadline: it cancels the order unless it
// was paid, and says what it did.
func (s *shop) cancelIfUnpaid(ctx context.Context, id string) (string, error) {
	res, err := s.db.ExecContext(ctx, "UPDATE orders SET status = 'cancelled' WHERE id = ? AND status = 'unpaid'", id)
	if err != nil {
		return "", fmt.Errorf("cancel order %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return "not unpaid any more: nothing to do", err
	}
	return "unpaid: order cancelled", nil
}

// statuses lists every order as id=status, by id.
func (s *shop) statuses(ctx context.Context) (string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, status FROM orders ORDER BY id")
	if err != nil {
		return "", fmt.Errorf("read orders: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return "", fmt.Errorf("read orders: %w", err)
		}
		out = append(out, id+"="+status)
	}
	return strings.Join(out, " "), rows.Err()
}
