package forwarder

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Leases: the outbox is split into outbox.Partitions partitions by the hash of each event's
// ordering key. Each partition of a lease group is owned by at most one relay at a time: a row
// in the leases table with the owner, an expiry and an epoch, renewed by heartbeats. Every relay
// aims at an equal share (partitions / live relays, rounded up): it releases what it holds above
// its share and takes free or expired partitions below it. A relay that dies or stalls stops
// renewing; its partitions expire and the others take them over.
//
// Fencing: no transaction is held while a batch is published. A worker reads its leases with
// their epochs, claims and publishes the rows, and then acknowledges them in one short
// transaction that first locks the batch's lease rows and keeps only the rows of partitions
// whose owner and epoch are still the ones it claimed under. Every takeover increments the
// epoch under the same row lock, so once a takeover has committed, the old owner's
// acknowledgements of that partition are refused: a relay that lost a partition can neither
// delete, mark nor park its rows.
//
// Locking order: every transaction that locks lease rows locks them by primary key, one point
// lookup per row, in ascending partition order (lockLeases), and lease rows before event rows.
// Nothing else locks lease rows, so relays cannot deadlock on them, and on MySQL a lock never
// covers, nor waits for, another relay's partitions (the UPDATEs that follow run under READ
// COMMITTED, whose semi-consistent read skips the locked rows they do not match).
//
// Clocks: expiry and liveness are computed by the database (dbTime), so relays whose clocks
// disagree still agree on who owns what.

// lease is a partition owned by this relay and the epoch it was taken under.
type lease struct {
	partition int
	epoch     int64
}

// dbTime returns an SQL expression, with one placeholder, for the database's current time plus
// offset, and the argument for that placeholder. It is the one place the forwarder reads the
// database's clock.
func (s *store) dbTime(offset time.Duration) (string, any) {
	switch s.dialect {
	case outbox.Postgres:
		return "(clock_timestamp() + ?::bigint * interval '1 microsecond')", offset.Microseconds()
	case outbox.MySQL:
		return "(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)", offset.Microseconds()
	default:
		// The fixed-width text of outbox.Dialect.TimeArg: %f gives milliseconds, padded to micros.
		return "(strftime('%Y-%m-%d %H:%M:%f', 'now', ?) || '000')", fmt.Sprintf("%+.6f seconds", offset.Seconds())
	}
}

// lockSuffix is what a SELECT appends to lock the rows it returns; SQLite has no row locks (its
// write transactions are serialized by the database lock).
func (s *store) lockSuffix(skipLocked bool) string {
	switch {
	case s.dialect == outbox.SQLite:
		return ""
	case skipLocked:
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// ensureLeaseRows creates the group's lease rows if they do not exist yet.
func (s *store) ensureLeaseRows(ctx context.Context, db *sql.DB) error {
	args := make([]any, 0, 2*outbox.Partitions)
	for p := range outbox.Partitions {
		args = append(args, s.group, p)
	}
	values := "(?, ?)"
	for range outbox.Partitions - 1 {
		values += ", (?, ?)"
	}
	var query string
	switch s.dialect {
	case outbox.Postgres:
		query = "INSERT INTO " + s.table.Leases() + " (lease_group, partition_no) VALUES " + values + " ON CONFLICT DO NOTHING"
	case outbox.MySQL:
		query = "INSERT IGNORE INTO " + s.table.Leases() + " (lease_group, partition_no) VALUES " + values
	default:
		query = "INSERT OR IGNORE INTO " + s.table.Leases() + " (lease_group, partition_no) VALUES " + values
	}
	if _, err := db.ExecContext(ctx, s.q(query), args...); err != nil {
		return fmt.Errorf("create lease rows of group %q: %w", s.group, err)
	}
	return nil
}

// liveLeases reads, without locking anything, the unexpired leases this relay holds among the
// partitions p with p % workers == worker.
func (s *store) liveLeases(ctx context.Context, q querier, owner string, worker, workers int) ([]lease, error) {
	now, nowArg := s.dbTime(0)
	rows, err := q.QueryContext(ctx, s.q("SELECT partition_no, epoch FROM "+s.table.Leases()+
		" WHERE lease_group = ? AND owner = ? AND partition_no % ? = ? AND expires_at > "+now+" ORDER BY partition_no"),
		s.group, owner, workers, worker, nowArg)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	var out []lease
	for rows.Next() {
		var l lease
		if err := rows.Scan(&l.partition, &l.epoch); err != nil {
			return nil, fmt.Errorf("read leases: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// leaseRow is a locked lease row.
type leaseRow struct {
	owner string
	epoch int64
}

// lockLeases locks the lease rows of the partitions, by primary key and in ascending partition
// order, until tx ends, and returns them. With skipLocked, rows locked by another transaction
// are left out instead of waited for.
func (s *store) lockLeases(ctx context.Context, tx *sql.Tx, partitions []int, skipLocked bool) (map[int]leaseRow, error) {
	out := make(map[int]leaseRow, len(partitions))
	if len(partitions) == 0 {
		return out, nil
	}
	var (
		query string
		args  []any
	)
	if s.dialect == outbox.MySQL {
		// One point lookup per row, in ascending order (pointLookups).
		table, list := pointLookups(partitions)
		query = "SELECT l.partition_no, l.owner, l.epoch FROM " + table + " STRAIGHT_JOIN " + s.table.Leases() +
			" l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n" + s.lockSuffix(skipLocked)
		args = []any{list, s.group}
	} else {
		query = "SELECT partition_no, owner, epoch FROM " + s.table.Leases() + " WHERE lease_group = ? AND partition_no IN " +
			in(len(partitions)) + " ORDER BY partition_no" + s.lockSuffix(skipLocked)
		args = append([]any{s.group}, intArgs(partitions)...)
	}
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("lock leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p     int
			owner sql.NullString
			epoch int64
		)
		if err := rows.Scan(&p, &owner, &epoch); err != nil {
			return nil, fmt.Errorf("lock leases: %w", err)
		}
		out[p] = leaseRow{owner: owner.String, epoch: epoch}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock leases: %w", err)
	}
	return out, nil
}

// fence locks the lease rows of the claimed leases and returns the partitions whose owner and
// epoch are still the claimed ones: only their rows may be acknowledged by tx. A lease that
// expired but was not taken over still counts: nobody else can have touched its rows.
func (s *store) fence(ctx context.Context, tx *sql.Tx, owner string, claimed []lease) (map[int]bool, error) {
	parts := make([]int, len(claimed))
	for i, l := range claimed {
		parts[i] = l.partition
	}
	locked, err := s.lockLeases(ctx, tx, parts, false)
	if err != nil {
		return nil, err
	}
	valid := make(map[int]bool, len(claimed))
	for _, l := range claimed {
		if row, ok := locked[l.partition]; ok && row.owner == owner && row.epoch == l.epoch {
			valid[l.partition] = true
		}
	}
	return valid, nil
}

// inTx runs fn in a transaction and commits it.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
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

// inLeaseTx runs fn in a transaction that locks lease rows. Such a transaction must not outlive
// a pause of this process: a relay stopped (SIGSTOP, a long GC pause) between two statements
// would keep the lease rows locked, and the other relays, which skip locked lease rows, could
// not take its partitions over. So the database ends the transaction (and the connection) when
// it stays idle longer than s.idleTimeout: PostgreSQL's idle_in_transaction_session_timeout,
// set for this transaction only, and MariaDB's idle_transaction_timeout, set on the connection
// for the transaction and reset after it (MySQL 8 has no such setting: there the transaction
// runs without it). SQLite has no row locks. A zero idleTimeout runs a plain transaction.
func (s *store) inLeaseTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	switch {
	case s.dialect == outbox.SQLite || (s.idleTimeout <= 0 && s.dialect == outbox.Postgres):
		return inTx(ctx, db, fn)
	case s.dialect == outbox.Postgres:
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d",
				s.idleTimeout.Milliseconds())); err != nil {
				return fmt.Errorf("bound the transaction's idle time: %w", err)
			}
			return fn(tx)
		})
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if s.idleTimeout > 0 {
		seconds := max(1, int(s.idleTimeout.Round(time.Second)/time.Second))
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

func (s *store) ownedPartitions(ctx context.Context, q querier, owner string) ([]int, error) {
	parts, err := queryInts(ctx, q, s.q("SELECT partition_no FROM "+s.table.Leases()+
		" WHERE lease_group = ? AND owner = ? ORDER BY partition_no"), s.group, owner)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return parts, nil
}

// releaseAll gives up every lease and the relay's registration (graceful shutdown).
func (s *store) releaseAll(ctx context.Context, db *sql.DB, owner string) error {
	parts, err := s.ownedPartitions(ctx, db, owner)
	if err != nil {
		return err
	}
	if _, err := s.release(ctx, db, owner, parts); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, s.q("DELETE FROM "+s.table.Relays()+" WHERE lease_group = ? AND owner = ?"), s.group, owner); err != nil {
		return fmt.Errorf("unregister relay: %w", err)
	}
	return nil
}
