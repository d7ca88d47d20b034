package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Dialect is the adapter of one database: the parts of the forwarder's SQL that differ between
// databases. Everything else is written once, in Statements, with ? placeholders the adapter
// rebinds.
type Dialect interface {
	// Name is the outbox dialect the adapter is for.
	Name() outbox.Dialect
	// Rebind rewrites the ? placeholders of query into the database's.
	Rebind(query string) string
	// TimeArg is t as the value the database stores in a timestamp column.
	TimeArg(t time.Time) any
	// Now returns an SQL expression, with one placeholder, for the database's current time plus
	// offset, and the argument for that placeholder. It is the one place the forwarder reads the
	// database's clock, so relays whose clocks disagree still agree on leases and liveness.
	Now(offset time.Duration) (expr string, arg any)
	// LockSuffix is what a SELECT appends to lock the rows it returns, or, with skipLocked, to
	// leave out those another transaction locked.
	LockSuffix(skipLocked bool) string
	// InsertIgnore is an INSERT of values ("(?, ?), ...") into the columns of table that skips
	// the rows whose key exists.
	InsertIgnore(table, columns, values string) string
	// RegisterRelay records the heartbeat of owner at the database's time. exclusive reports that
	// the statement inserts nothing while another relay of the database is alive (younger than
	// ttl): the caller reads that from the rows affected.
	RegisterRelay(t outbox.Table, group, owner string, ttl time.Duration) (q Query, exclusive bool)
	// LockLeases selects partition_no, owner, epoch of the group's lease rows of the
	// partitions, locking them by primary key in ascending partition order (LockSuffix).
	LockLeases(t outbox.Table, group string, partitions []int, skipLocked bool) Query
	// DeleteEvents deletes the outbox rows seqs.
	DeleteEvents(t outbox.Table, seqs []int64) Query
	// EventIDs selects seq, event_id, partition_no of the outbox rows seqs.
	EventIDs(t outbox.Table, seqs []int64) Query
	// Prune deletes up to limit published rows older than cutoff.
	Prune(t outbox.Table, cutoff time.Time, limit int) Query
	// LeaseTx runs fn in a transaction that locks lease rows. Such a transaction must not
	// outlive a pause of the relay (SIGSTOP, a long GC pause) between two statements: it would
	// keep the lease rows locked, and the other relays, which skip locked lease rows, could not
	// take its partitions over. So the database ends it when it stays idle longer than idle
	// (where the database can); a zero idle runs a plain transaction.
	LeaseTx(ctx context.Context, db *sql.DB, idle time.Duration, fn func(tx *sql.Tx) error) error
}

// For returns the adapter of the dialect.
func For(d outbox.Dialect) (Dialect, error) {
	switch d {
	case outbox.Postgres:
		return Postgres{}, nil
	case outbox.MySQL:
		return MySQL{}, nil
	case outbox.SQLite:
		return SQLite{}, nil
	}
	return nil, fmt.Errorf("sqlstore: no adapter for dialect %q", d)
}

// InTx runs fn in a transaction of db and commits it.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// The statements PostgreSQL and SQLite share: lists of keys as IN lists.

func lockLeasesIn(d Dialect, t outbox.Table, group string, partitions []int, skipLocked bool) Query {
	return Query{SQL: d.Rebind("SELECT partition_no, owner, epoch FROM " + t.Leases() + " WHERE lease_group = ? AND partition_no IN " +
		in(len(partitions)) + " ORDER BY partition_no" + d.LockSuffix(skipLocked)),
		Args: append([]any{group}, intArgs(partitions)...)}
}

func deleteEventsIn(d Dialect, t outbox.Table, seqs []int64) Query {
	return Query{SQL: d.Rebind("DELETE FROM " + t.Events() + " WHERE seq IN " + in(len(seqs))), Args: intArgs(seqs)}
}

func eventIDsIn(d Dialect, t outbox.Table, seqs []int64) Query {
	return Query{SQL: d.Rebind("SELECT seq, event_id, partition_no FROM " + t.Events() + " WHERE seq IN " + in(len(seqs))), Args: intArgs(seqs)}
}

func pruneIn(d Dialect, t outbox.Table, cutoff time.Time, limit int) Query {
	return Query{SQL: d.Rebind("DELETE FROM " + t.Events() + " WHERE seq IN (SELECT seq FROM " + t.Events() +
		" WHERE status = 1 AND published_at < ? LIMIT ?)"), Args: []any{d.TimeArg(cutoff), limit}}
}

// upsertRelay is RegisterRelay's statement on PostgreSQL and MySQL, with the upsert clause.
func upsertRelay(d Dialect, t outbox.Table, group, owner, onConflict string) Query {
	now, nowArg := d.Now(0)
	return Query{SQL: d.Rebind("INSERT INTO " + t.Relays() + " (lease_group, owner, heartbeat_at) VALUES (?, ?, " + now + ") " + onConflict),
		Args: []any{group, owner, nowArg}}
}
