package relay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// The wal source's statements: parking the events of failing keys in the table, and reading
// which keys have rows there.

// ParkFenced writes rows into the table in one transaction that first fences leases (Fence:
// the lease rows locked, their epochs and owner checked). It writes nothing and returns the
// partitions it lost when any row's partition is no longer this relay's: a relay that lost a
// partition must not park its keys, since the new owner streams them again from the slot's
// confirmed position. A row whose event is in the table already is left out (Park).
func (s *Store) ParkFenced(ctx context.Context, db *sql.DB, owner string, leases []Lease, rows []sqlstore.ParkedRow) (lost []int, err error) {
	err = s.InLeaseTx(ctx, db, func(tx *sql.Tx) error {
		owned, err := s.Fence(ctx, tx, owner, leases)
		if err != nil {
			return err
		}
		lost = nil
		seen := map[int]bool{}
		for _, r := range rows {
			if !owned[r.Partition] && !seen[r.Partition] {
				seen[r.Partition] = true
				lost = append(lost, r.Partition)
			}
		}
		if len(lost) > 0 {
			return nil
		}
		for _, r := range rows {
			q, err := s.SQL().WAL().Park(r)
			if err != nil {
				return err
			}
			if _, err := q.Exec(ctx, tx); err != nil {
				return fmt.Errorf("park event %s: %w", r.Event.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("park %d events: %w", len(rows), err)
	}
	return lost, nil
}

// ParkedKeys returns the key hashes that have a pending or dead row in the table.
func (s *Store) ParkedKeys(ctx context.Context, q Querier) (map[int64]bool, error) {
	rows, err := s.SQL().WAL().ParkedKeys().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the parked keys: %w", err)
	}
	defer rows.Close()
	keys := map[int64]bool{}
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("read the parked keys: %w", err)
		}
		keys[k] = true
	}
	return keys, rows.Err()
}

// PruneDiscarded deletes the tombstones of discarded events that the slot's confirmed position
// passed, and returns how many it deleted.
func (s *Store) PruneDiscarded(ctx context.Context, q Querier, slot string) (int64, error) {
	res, err := s.SQL().WAL().PruneDiscarded(slot).Exec(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("prune the tombstones of discarded events: %w", err)
	}
	return res.RowsAffected()
}
