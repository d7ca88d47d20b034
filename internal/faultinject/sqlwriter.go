package faultinject

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/outboxkit/outboxkit/outbox"
)

// eventWriter writes a transaction's events into an installation's outbox table: outbox.Writer,
// or plainSQLWriter when Config.SQLWriters is set.
type eventWriter interface {
	WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error
}

// plainSQLWriter writes events the way a service in another language does (docs/writers.md):
// one single-row INSERT per event of the columns such a writer knows, key_hash left NULL, so the
// table's trigger computes the key hash and partition and takes the key's lock. One statement
// per event is what per-key order needs on MariaDB (a multi-row INSERT of several keys reserves
// their seq values before taking their locks). created_at is left to the database's default.
type plainSQLWriter struct {
	insert string
}

// newPlainSQLWriter returns a plain-SQL writer into table (its name as the writers' connections
// resolve it).
func newPlainSQLWriter(dialect outbox.Dialect, table string) (*plainSQLWriter, error) {
	cols := "(event_id, topic, tenant_id, aggregate_type, aggregate_id, event_type, payload, headers)"
	switch dialect {
	case outbox.Postgres:
		return &plainSQLWriter{insert: "INSERT INTO " + table + " " + cols +
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"}, nil
	case outbox.MySQL:
		return &plainSQLWriter{insert: "INSERT INTO " + table + " " + cols +
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?)"}, nil
	default:
		return nil, fmt.Errorf("faultinject: plain-SQL writers need PostgreSQL or MySQL, not %q", dialect)
	}
}

// WriteTx inserts events in tx, in the given order (the caller sorts them by key, as every
// transaction of the run takes its keys in one order).
func (w *plainSQLWriter) WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error {
	for _, ev := range events {
		headers := ev.Headers
		if headers == nil {
			headers = map[string]string{}
		}
		h, err := json.Marshal(headers)
		if err != nil {
			return fmt.Errorf("faultinject: headers of event %s: %w", ev.ID, err)
		}
		if _, err := tx.ExecContext(ctx, w.insert, ev.ID.String(), ev.Topic, ev.TenantID, ev.AggregateType,
			ev.AggregateID, ev.EventType, ev.Payload, string(h)); err != nil {
			return fmt.Errorf("faultinject: plain INSERT of event %s (key %s): %w", ev.ID, ev.AggregateID, err)
		}
	}
	return nil
}

// newEventWriters returns the installation's writers, taken in turn by the writer goroutines:
// outbox.Writer; or plain SQL (Config.SQLWriters); or both (Config.MixedWriters), so that SQL
// and Go writers commit events of the same keys concurrently; or, with the wal source, the
// three wal writers (newWALWriters).
func (e *env) newEventWriters(ctx context.Context, in *installation, maxPayload int) ([]eventWriter, error) {
	if e.cfg.source() == "wal" {
		return e.newWALWriters(ctx, in, maxPayload)
	}
	goWriter, err := outbox.NewWriter(outbox.Config{Dialect: e.cfg.Dialect, Table: in.configured, MaxPayloadBytes: maxPayload})
	if err != nil {
		return nil, err
	}
	if !e.cfg.SQLWriters {
		return []eventWriter{goWriter}, nil
	}
	plain, err := newPlainSQLWriter(e.cfg.Dialect, in.table.Events())
	if err != nil {
		return nil, err
	}
	if e.cfg.MixedWriters {
		return []eventWriter{plain, goWriter}, nil
	}
	return []eventWriter{plain}, nil
}

// writerFor returns the writer of writer goroutine number slot.
func (in *installation) writerFor(slot int) eventWriter { return in.writers[slot%len(in.writers)] }
