package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// SQLite is the adapter of SQLite: one relay per database, no row locks (its write
// transactions are serialized by the database lock), times stored as fixed-width text.
type SQLite struct{}

// Name is outbox.SQLite.
func (SQLite) Name() outbox.Dialect { return outbox.SQLite }

// Rebind keeps the ? placeholders.
func (SQLite) Rebind(query string) string { return outbox.SQLite.Rebind(query) }

// TimeArg is t as fixed-width text.
func (SQLite) TimeArg(t time.Time) any { return outbox.SQLite.TimeArg(t) }

// Now is strftime of 'now' plus offset, as the fixed-width text of TimeArg (%f gives
// milliseconds, padded to micros).
func (SQLite) Now(offset time.Duration) (string, any) {
	return "(strftime('%Y-%m-%d %H:%M:%f', 'now', ?) || '000')", fmt.Sprintf("%+.6f seconds", offset.Seconds())
}

// LockSuffix is empty: SQLite has no row locks.
func (SQLite) LockSuffix(bool) string { return "" }

// InsertIgnore is INSERT OR IGNORE.
func (SQLite) InsertIgnore(table, columns, values string) string {
	return "INSERT OR IGNORE INTO " + table + " (" + columns + ") VALUES " + values
}

// RegisterRelay is exclusive: it inserts nothing while another relay's heartbeat is younger
// than ttl. The check and the insert are one statement, so two relays starting together cannot
// both pass.
func (d SQLite) RegisterRelay(t outbox.Table, group, owner string, ttl time.Duration) (Query, bool) {
	now, nowArg := d.Now(0)
	alive, aliveArg := d.Now(-ttl)
	return Query{SQL: "INSERT INTO " + t.Relays() + " (lease_group, owner, heartbeat_at) SELECT ?, ?, " + now +
		" WHERE NOT EXISTS (SELECT 1 FROM " + t.Relays() + " WHERE owner <> ? AND heartbeat_at > " + alive + ")" +
		" ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
		Args: []any{group, owner, nowArg, owner, aliveArg}}, true
}

// LockLeases selects the lease rows by an IN list (no lock needed).
func (d SQLite) LockLeases(t outbox.Table, group string, partitions []int, skipLocked bool) Query {
	return lockLeasesIn(d, t, group, partitions, skipLocked)
}

// DeleteEvents deletes by an IN list.
func (d SQLite) DeleteEvents(t outbox.Table, seqs []int64) Query { return deleteEventsIn(d, t, seqs) }

// EventIDs selects by an IN list.
func (d SQLite) EventIDs(t outbox.Table, seqs []int64) Query { return eventIDsIn(d, t, seqs) }

// Prune deletes the oldest published rows through a subquery with LIMIT.
func (d SQLite) Prune(t outbox.Table, cutoff time.Time, limit int) Query {
	return pruneIn(d, t, cutoff, limit)
}

// LeaseTx is a plain transaction: SQLite has no row locks to hold.
func (SQLite) LeaseTx(ctx context.Context, db *sql.DB, _ time.Duration, fn func(tx *sql.Tx) error) error {
	return InTx(ctx, db, fn)
}
