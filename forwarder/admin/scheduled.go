package admin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// The operator's view of scheduled events (docs/scheduled.md): how many wait, when the next is
// due, which they are, and cancelling them as outbox.Writer.Cancel does.

// ScheduledSummary is how many events are scheduled and when the next is due.
type ScheduledSummary struct {
	// Count is the number of scheduled events the relay has not released yet.
	Count int64
	// NextDue is the earliest delivery time among them (zero when none).
	NextDue time.Time
}

// ScheduledSummary returns how many events are scheduled and when the next is due.
func (a *Admin) ScheduledSummary(ctx context.Context) (ScheduledSummary, error) {
	var s ScheduledSummary
	next, getNext := outbox.TimeScanner()
	if err := a.sql().ScheduledSummary().QueryRow(ctx, a.db).Scan(&s.Count, next); err != nil {
		return ScheduledSummary{}, fmt.Errorf("admin: count scheduled events: %w", err)
	}
	var err error
	if s.NextDue, err = getNext(); err != nil {
		return ScheduledSummary{}, fmt.Errorf("admin: count scheduled events: %w", err)
	}
	return s, nil
}

// ScheduledEvent is one scheduled event not released yet.
type ScheduledEvent struct {
	Seq           int64
	EventID       uuid.UUID
	Topic         string
	AggregateType string
	AggregateID   string
	EventType     string
	TenantID      string
	CreatedAt     time.Time
	DeliverAt     time.Time
}

// ScheduledEvents lists up to limit scheduled events, next due first.
func (a *Admin) ScheduledEvents(ctx context.Context, limit int) ([]ScheduledEvent, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("admin: ScheduledEvents: limit must be positive, got %d", limit)
	}
	rows, err := a.sql().ScheduledEvents(limit).Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: list scheduled events: %w", err)
	}
	defer rows.Close()
	var out []ScheduledEvent
	for rows.Next() {
		var (
			e  ScheduledEvent
			id string
		)
		created, getCreated := outbox.TimeScanner()
		due, getDue := outbox.TimeScanner()
		if err := rows.Scan(&e.Seq, &id, &e.Topic, &e.AggregateType, &e.AggregateID, &e.EventType, &e.TenantID, created, due); err != nil {
			return nil, fmt.Errorf("admin: list scheduled events: %w", err)
		}
		if e.EventID, err = uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("admin: scheduled event %d: event id %q: %w", e.Seq, id, err)
		}
		if e.CreatedAt, err = getCreated(); err != nil {
			return nil, err
		}
		if e.DeliverAt, err = getDue(); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// CancelScheduled cancels the scheduled events ids in a transaction of its own, exactly as
// outbox.Writer.Cancel does in a business transaction (the same statement and the same race
// with the relay's release), and says for each id whether it was cancelled (Changed), already
// released by the relay (Released) or not found. With ForTenants, an id of another tenant's
// event is reported NotFound and left alone.
func (a *Admin) CancelScheduled(ctx context.Context, ids ...uuid.UUID) (outbox.ScheduleResult, error) {
	if len(ids) == 0 {
		return outbox.ScheduleResult{}, fmt.Errorf("admin: cancel: no event ids given")
	}
	w, err := outbox.NewWriter(outbox.Config{Dialect: a.dialect, Table: a.table.Events()})
	if err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("admin: cancel: %w", err)
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("admin: cancel: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	others, err := a.ofOtherTenants(ctx, tx, ids)
	if err != nil {
		return outbox.ScheduleResult{}, err
	}
	var mine, foreign []uuid.UUID
	for _, id := range ids {
		if others[id] {
			foreign = append(foreign, id)
		} else {
			mine = append(mine, id)
		}
	}
	var res outbox.ScheduleResult
	if len(mine) > 0 {
		if res, err = w.Cancel(ctx, wsql.TxFromStdSQL(tx), mine...); err != nil {
			return outbox.ScheduleResult{}, fmt.Errorf("admin: %w", err)
		}
	}
	res.NotFound = append(res.NotFound, foreign...)
	if err := tx.Commit(); err != nil {
		return outbox.ScheduleResult{}, fmt.Errorf("admin: cancel: commit: %w", err)
	}
	return res, nil
}

// ofOtherTenants returns which of ids are events of tenants other than the Admin's (none
// without ForTenants).
func (a *Admin) ofOtherTenants(ctx context.Context, tx *sql.Tx, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(a.tenants) == 0 {
		return out, nil
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = id.String()
	}
	rows, err := a.sql().ScheduledOfOtherTenants(args).Query(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("admin: cancel: look up the tenants of %d events: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, fmt.Errorf("admin: cancel: %w", err)
		}
		id, err := uuid.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("admin: cancel: event id %q: %w", text, err)
		}
		out[id] = true
	}
	return out, rows.Err()
}
