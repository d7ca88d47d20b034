package forwarder

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
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
// Clocks: expiry and liveness are computed by the database (sqlstore.Dialect.Now), so relays whose clocks
// disagree still agree on who owns what.

// lease is a partition owned by this relay and the epoch it was taken under.
type lease struct {
	partition int
	epoch     int64
}

// ensureLeaseRows creates the group's lease rows if they do not exist yet.
func (s *store) ensureLeaseRows(ctx context.Context, db *sql.DB) error {
	if _, err := s.sql().EnsureLeaseRows().Exec(ctx, db); err != nil {
		return fmt.Errorf("create lease rows of group %q: %w", s.group, err)
	}
	return nil
}

// liveLeases reads, without locking anything, the unexpired leases this relay holds among the
// partitions p with p % workers == worker.
func (s *store) liveLeases(ctx context.Context, q querier, owner string, worker, workers int) ([]lease, error) {
	rows, err := s.sql().LiveLeases(owner, worker, workers).Query(ctx, q)
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
	rows, err := s.sql().LockLeases(partitions, skipLocked).Query(ctx, tx)
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
	return sqlstore.InTx(ctx, db, fn)
}

// inLeaseTx runs fn in a transaction that locks lease rows. Such a transaction must not outlive
// a pause of this process: a relay stopped (SIGSTOP, a long GC pause) between two statements
// would keep the lease rows locked, and the other relays, which skip locked lease rows, could
// not take its partitions over. So the database ends the transaction when it stays idle longer
// than s.idleTimeout, where it can (sqlstore.Dialect.LeaseTx). A zero idleTimeout runs a plain
// transaction.
func (s *store) inLeaseTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return s.sql().LeaseTx(ctx, db, s.idleTimeout, fn)
}

// ownedPartitions lists the partitions owner holds, expired or not, in ascending order.
func (s *store) ownedPartitions(ctx context.Context, q querier, owner string) ([]int, error) {
	parts, err := s.sql().OwnedPartitions(owner).Ints(ctx, q)
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
	if _, err := s.sql().Unregister(owner).Exec(ctx, db); err != nil {
		return fmt.Errorf("unregister relay: %w", err)
	}
	return nil
}
