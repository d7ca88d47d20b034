package relay

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

// Lease is a partition owned by this relay and the epoch it was taken under.
type Lease struct {
	Partition int
	Epoch     int64
}

// EnsureLeaseRows creates the group's lease rows if they do not exist yet.
func (s *Store) EnsureLeaseRows(ctx context.Context, db *sql.DB) error {
	if _, err := s.SQL().EnsureLeaseRows().Exec(ctx, db); err != nil {
		return fmt.Errorf("create lease rows of group %q: %w", s.Group, err)
	}
	return nil
}

// LiveLeases reads, without locking anything, the unexpired leases this relay holds among the
// partitions p with p % workers == worker.
func (s *Store) LiveLeases(ctx context.Context, q Querier, owner string, worker, workers int) ([]Lease, error) {
	rows, err := s.SQL().LiveLeases(owner, worker, workers).Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		if err := rows.Scan(&l.Partition, &l.Epoch); err != nil {
			return nil, fmt.Errorf("read leases: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// LeaseRow is a locked lease row.
type LeaseRow struct {
	Owner string
	Epoch int64
}

// LockLeases locks the lease rows of the partitions, by primary key and in ascending partition
// order, until tx ends, and returns them. With skipLocked, rows locked by another transaction
// are left out instead of waited for.
func (s *Store) LockLeases(ctx context.Context, tx *sql.Tx, partitions []int, skipLocked bool) (map[int]LeaseRow, error) {
	out := make(map[int]LeaseRow, len(partitions))
	if len(partitions) == 0 {
		return out, nil
	}
	rows, err := s.SQL().LockLeases(partitions, skipLocked).Query(ctx, tx)
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
		out[p] = LeaseRow{Owner: owner.String, Epoch: epoch}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock leases: %w", err)
	}
	return out, nil
}

// Fence locks the lease rows of the claimed leases and returns the partitions whose owner and
// epoch are still the claimed ones: only their rows may be acknowledged by tx. A lease that
// expired but was not taken over still counts: nobody else can have touched its rows.
func (s *Store) Fence(ctx context.Context, tx *sql.Tx, owner string, claimed []Lease) (map[int]bool, error) {
	parts := make([]int, len(claimed))
	for i, l := range claimed {
		parts[i] = l.Partition
	}
	locked, err := s.LockLeases(ctx, tx, parts, false)
	if err != nil {
		return nil, err
	}
	valid := make(map[int]bool, len(claimed))
	for _, l := range claimed {
		if row, ok := locked[l.Partition]; ok && row.Owner == owner && row.Epoch == l.Epoch {
			valid[l.Partition] = true
		}
	}
	return valid, nil
}

// InTx runs fn in a transaction and commits it.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return sqlstore.InTx(ctx, db, fn)
}

// InLeaseTx runs fn in a transaction that locks lease rows. Such a transaction must not outlive
// a pause of this process: a relay stopped (SIGSTOP, a long GC pause) between two statements
// would keep the lease rows locked, and the other relays, which skip locked lease rows, could
// not take its partitions over. So the database ends the transaction when it stays idle longer
// than s.idleTimeout, where it can (sqlstore.Dialect.LeaseTx). A zero idleTimeout runs a plain
// transaction.
func (s *Store) InLeaseTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return s.SQL().LeaseTx(ctx, db, s.IdleTimeout, fn)
}

// OwnedPartitions lists the partitions owner holds, expired or not, in ascending order.
func (s *Store) OwnedPartitions(ctx context.Context, q Querier, owner string) ([]int, error) {
	parts, err := s.SQL().OwnedPartitions(owner).Ints(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return parts, nil
}

// ReleaseAll gives up every lease and the relay's registration (graceful shutdown).
func (s *Store) ReleaseAll(ctx context.Context, db *sql.DB, owner string) error {
	parts, err := s.OwnedPartitions(ctx, db, owner)
	if err != nil {
		return err
	}
	if _, err := s.Release(ctx, db, owner, parts); err != nil {
		return err
	}
	if _, err := s.SQL().Unregister(owner).Exec(ctx, db); err != nil {
		return fmt.Errorf("unregister relay: %w", err)
	}
	return nil
}
