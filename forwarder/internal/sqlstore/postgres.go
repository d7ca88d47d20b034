package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Postgres is the adapter of PostgreSQL.
type Postgres struct{}

// Name is outbox.Postgres.
func (Postgres) Name() outbox.Dialect { return outbox.Postgres }

// Rebind numbers the placeholders ($1, $2, ...).
func (Postgres) Rebind(query string) string { return outbox.Postgres.Rebind(query) }

// TimeArg is t in UTC.
func (Postgres) TimeArg(t time.Time) any { return outbox.Postgres.TimeArg(t) }

// Now is clock_timestamp() plus offset in microseconds.
func (Postgres) Now(offset time.Duration) (string, any) {
	return "(clock_timestamp() + ?::bigint * interval '1 microsecond')", offset.Microseconds()
}

// LockSuffix is FOR UPDATE [SKIP LOCKED].
func (Postgres) LockSuffix(skipLocked bool) string {
	if skipLocked {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// InsertIgnore is INSERT ... ON CONFLICT DO NOTHING.
func (Postgres) InsertIgnore(table, columns, values string) string {
	return "INSERT INTO " + table + " (" + columns + ") VALUES " + values + " ON CONFLICT DO NOTHING"
}

// RegisterRelay upserts the heartbeat (never exclusive).
func (d Postgres) RegisterRelay(t outbox.Table, group, owner string, _ time.Duration) (Query, bool) {
	return upsertRelay(d, t, group, owner, "ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at"), false
}

// LockLeases selects the lease rows by an IN list.
func (d Postgres) LockLeases(t outbox.Table, group string, partitions []int, skipLocked bool) Query {
	return lockLeasesIn(d, t, group, partitions, skipLocked)
}

// DeleteEvents deletes by an IN list.
func (d Postgres) DeleteEvents(t outbox.Table, seqs []int64) Query { return deleteEventsIn(d, t, seqs) }

// EventIDs selects by an IN list.
func (d Postgres) EventIDs(t outbox.Table, seqs []int64) Query { return eventIDsIn(d, t, seqs) }

// Prune deletes the oldest published rows through a subquery with LIMIT.
func (d Postgres) Prune(t outbox.Table, cutoff time.Time, limit int) Query {
	return pruneIn(d, t, cutoff, limit)
}

// LeaseTx bounds the transaction's idle time with idle_in_transaction_session_timeout, set for
// this transaction only: PostgreSQL then ends the transaction and the connection.
func (Postgres) LeaseTx(ctx context.Context, db *sql.DB, idle time.Duration, fn func(tx *sql.Tx) error) error {
	if idle <= 0 {
		return InTx(ctx, db, fn)
	}
	return InTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d",
			idle.Milliseconds())); err != nil {
			return fmt.Errorf("bound the transaction's idle time: %w", err)
		}
		return fn(tx)
	})
}
