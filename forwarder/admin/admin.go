package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Admin is the operator's view of one outbox table: its backlog, the keys the relay holds back,
// the dead and skipped events to list, replay, skip or discard, and the relays, transactional
// units and replication slots that serve it. It only reads and changes the outbox's tables: it
// needs no relay running, and one running sees its changes at its next claim.
type Admin struct {
	db      *sql.DB
	table   outbox.Table
	dialect outbox.Dialect // the table's
	// tenants scope the listings and actions (ForTenants); none: every event.
	tenants []string
}

// New returns an Admin for the table ("" means outbox.DefaultTable) of db, a database of the
// dialect.
func New(db *sql.DB, dialect outbox.Dialect, table string) (*Admin, error) {
	if db == nil {
		return nil, errors.New("admin: New: db is nil")
	}
	t, err := outbox.NewTable(dialect, table)
	if err != nil {
		return nil, fmt.Errorf("admin: New: %w", err)
	}
	return &Admin{db: db, table: t, dialect: dialect}, nil
}

// ForTenants returns an Admin whose listings, backlog and actions (Status, BlockedKeys,
// DeadLetters, FindDeadLetters, FailureGroups, Event, SkipKeys, Replay, ReplayDeadLetters,
// Discard, DiscardDeadLetters) see and touch the events of these tenants only, as a relay with
// forwarder.Config.Tenants relays them; no tenants: every event. A filter naming another tenant
// then selects nothing. Relays, Slots and Units stay installation-wide (they show no events).
func (a *Admin) ForTenants(tenants ...string) *Admin {
	return &Admin{db: a.db, table: a.table, dialect: a.dialect, tenants: append([]string(nil), tenants...)}
}

// sql returns the statements of the Admin's table and tenants (no lease group: the Admin's
// statements name the groups they read).
func (a *Admin) sql() sqlstore.Statements { return sqlstore.New(a.table, "", a.tenants) }

// DeadLetter is one dead-lettered event kept in the outbox table.
type DeadLetter struct {
	Seq           int64
	EventID       uuid.UUID
	Topic         string
	AggregateType string
	AggregateID   string
	EventType     string
	TenantID      string
	Attempts      int
	LastError     string
	CreatedAt     time.Time
}

// DeadLetters lists up to limit dead-lettered events, oldest first.
func (a *Admin) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("admin: DeadLetters: limit must be positive, got %d", limit)
	}
	rows, err := a.sql().DeadLetters(limit).Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: list dead letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		var (
			d  DeadLetter
			id string
		)
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&d.Seq, &id, &d.Topic, &d.AggregateType, &d.AggregateID, &d.EventType, &d.TenantID,
			&d.Attempts, &d.LastError, created); err != nil {
			return nil, fmt.Errorf("admin: list dead letters: %w", err)
		}
		if d.EventID, err = uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("admin: dead letter %d: event id %q: %w", d.Seq, id, err)
		}
		if d.CreatedAt, err = getCreated(); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Replay makes dead-lettered events pending again with fresh attempts; the forwarder publishes
// them, and then the later events of their keys, in order. It returns how many it replayed;
// ids that are not dead letters are ignored.
//
// A replayed event keeps a next attempt time (now): the CDC source leaves the keys of pending
// rows with one to its retry path, which publishes them in order (docs/cdc.md).
func (a *Admin) Replay(ctx context.Context, eventIDs ...uuid.UUID) (int64, error) {
	return a.update(ctx, "replay", a.sql().Replay, eventIDs)
}

// Discard deletes dead-lettered events for good, releasing the later events of their keys. It
// returns how many it deleted; ids that are not dead letters are ignored.
//
// The later pending events of their keys get a next attempt time (now) first, so that the CDC
// source leaves them to its retry path, in order, rather than letting newer events of the key
// overtake them; the polling source claims them as before.
func (a *Admin) Discard(ctx context.Context, eventIDs ...uuid.UUID) (int64, error) {
	if _, err := a.update(ctx, "discard", a.sql().MarkKeysOfDead, eventIDs); err != nil {
		return 0, err
	}
	return a.update(ctx, "discard", a.sql().Discard, eventIDs)
}

// update runs the statement of the ids.
func (a *Admin) update(ctx context.Context, what string, statement func(eventIDs []string) sqlstore.Query, ids []uuid.UUID) (int64, error) {
	if len(ids) == 0 {
		return 0, fmt.Errorf("admin: %s: no event ids given", what)
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = id.String()
	}
	res, err := statement(args).Exec(ctx, a.db)
	if err != nil {
		return 0, fmt.Errorf("admin: %s dead letters: %w", what, err)
	}
	return res.RowsAffected()
}

// TopicStatus summarizes the outbox for one topic.
type TopicStatus struct {
	Topic string
	// Pending rows, including those waiting for a retry.
	Pending int64
	// Retrying is the part of Pending that failed at least once.
	Retrying int64
	// Dead rows wait for an operator.
	Dead int64
	// Skipped rows are heads an operator skipped (SkipKeys): kept, holding nothing back, until
	// replayed or discarded.
	Skipped int64
	// OldestPending is the earliest time a pending row became due (zero when none): its
	// created_at, or for a released scheduled event its deliver_at (it did not wait before).
	OldestPending time.Time
}

// Status returns the backlog per topic.
func (a *Admin) Status(ctx context.Context) ([]TopicStatus, error) {
	rows, err := a.sql().Status().Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: outbox status: %w", err)
	}
	defer rows.Close()
	var out []TopicStatus
	for rows.Next() {
		var s TopicStatus
		oldest, getOldest := outbox.TimeScanner()
		if err := rows.Scan(&s.Topic, &s.Pending, &s.Retrying, &s.Dead, &s.Skipped, oldest); err != nil {
			return nil, fmt.Errorf("admin: outbox status: %w", err)
		}
		if s.OldestPending, err = getOldest(); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
