package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// MySQL is the adapter of MariaDB and MySQL. Its statements that lock or delete rows by a list
// of keys join the table to pointLookups instead of an IN list, so InnoDB locks just those rows.
type MySQL struct{}

// Name is outbox.MySQL.
func (MySQL) Name() outbox.Dialect { return outbox.MySQL }

// Rebind keeps the ? placeholders.
func (MySQL) Rebind(query string) string { return outbox.MySQL.Rebind(query) }

// TimeArg is t in UTC.
func (MySQL) TimeArg(t time.Time) any { return outbox.MySQL.TimeArg(t) }

// Now is UTC_TIMESTAMP(6) plus offset in microseconds.
func (MySQL) Now(offset time.Duration) (string, any) {
	return "(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)", offset.Microseconds()
}

// LockSuffix is FOR UPDATE [SKIP LOCKED].
func (MySQL) LockSuffix(skipLocked bool) string { return Postgres{}.LockSuffix(skipLocked) }

// InsertIgnore is INSERT IGNORE.
func (MySQL) InsertIgnore(table, columns, values string) string {
	return "INSERT IGNORE INTO " + table + " (" + columns + ") VALUES " + values
}

// RegisterRelay upserts the heartbeat (never exclusive).
func (d MySQL) RegisterRelay(t outbox.Table, group, owner string, _ time.Duration) (Query, bool) {
	return upsertRelay(d, t, group, owner, "ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)"), false
}

// LockLeases locks one lease row per point lookup, in ascending order.
func (d MySQL) LockLeases(t outbox.Table, group string, partitions []int, skipLocked bool) Query {
	table, list := pointLookups(partitions)
	return Query{SQL: "SELECT l.partition_no, l.owner, l.epoch FROM " + table + " STRAIGHT_JOIN " + t.Leases() +
		" l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n" + d.LockSuffix(skipLocked), Args: []any{list, group}}
}

// DeleteEvents deletes one row per point lookup: an IN list scanned the table.
func (MySQL) DeleteEvents(t outbox.Table, seqs []int64) Query {
	table, list := pointLookups(seqs)
	return Query{SQL: "DELETE e FROM " + table + " STRAIGHT_JOIN " + t.Events() + " e ON e.seq = p.n", Args: []any{list}}
}

// EventIDs reads one row per point lookup, as DeleteEvents.
func (MySQL) EventIDs(t outbox.Table, seqs []int64) Query {
	table, list := pointLookups(seqs)
	return Query{SQL: "SELECT e.seq, e.event_id, e.partition_no FROM " + table + " STRAIGHT_JOIN " + t.Events() + " e ON e.seq = p.n", Args: []any{list}}
}

// Prune uses DELETE ... ORDER BY ... LIMIT (MySQL refuses LIMIT in an IN subquery).
func (d MySQL) Prune(t outbox.Table, cutoff time.Time, limit int) Query {
	return Query{SQL: "DELETE FROM " + t.Events() + " WHERE status = 1 AND published_at < ? ORDER BY published_at LIMIT ?",
		Args: []any{d.TimeArg(cutoff), limit}}
}

// LeaseTx sets MariaDB's idle_transaction_timeout on the connection for the transaction and
// resets it after (MySQL 8 has no such setting: there the transaction runs without it), and
// runs the transaction under READ COMMITTED.
func (MySQL) LeaseTx(ctx context.Context, db *sql.DB, idle time.Duration, fn func(tx *sql.Tx) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if idle > 0 {
		seconds := max(1, int(idle.Round(time.Second)/time.Second))
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION idle_transaction_timeout = %d", seconds)); err == nil {
			// Reset on every path, before the connection goes back to the pool (the
			// application may share it); a connection that cannot be reset is discarded.
			defer func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if _, err := conn.ExecContext(rctx, "SET SESSION idle_transaction_timeout = DEFAULT"); err != nil {
					_ = conn.Raw(func(any) error { return driver.ErrBadConn })
				}
			}()
		}
	}
	// READ COMMITTED: an UPDATE that scans lease rows locked by another transaction skips those
	// that do not match its WHERE instead of waiting for them (InnoDB's semi-consistent read).
	// Under REPEATABLE READ, a heartbeat's UPDATE of its own candidates waited for a row an
	// acknowledgement had locked while the acknowledgement waited for one of the candidates:
	// a deadlock (Error 1213, seen in TestThreeForwardersKeepPerKeyOrder on MariaDB).
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
