package relay

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The heartbeat of the lease protocol (lease.go): a relay registers itself, renews its leases,
// and, by its SharePolicy, releases what it holds above its share or takes free or expired
// partitions below it.

// RegisterRelay records this relay's heartbeat at the database's time. On SQLite, which
// supports one relay per database, it refuses (registered false) while another relay's
// heartbeat is younger than ttl; the check and the insert are one statement, so two relays
// starting together cannot both pass.
func (s *Store) RegisterRelay(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (registered bool, err error) {
	query, exclusive := s.SQL().RegisterRelay(owner, ttl)
	res, err := query.Exec(ctx, db)
	if err != nil {
		return false, fmt.Errorf("register relay: %w", err)
	}
	if !exclusive {
		return true, nil
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("register relay: %w", err)
	}
	return n > 0, nil
}

// OtherRelay names a live relay other than owner (SQLite's one-relay check), or "" if none.
func (s *Store) OtherRelay(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (string, error) {
	var other string
	err := s.SQL().OtherRelay(owner, ttl).QueryRow(ctx, db).Scan(&other)
	if err == sql.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for other relays: %w", err)
	}
	return other, nil
}

// ErrOtherRelay is returned by heartbeat on SQLite while another relay runs on the database.
type ErrOtherRelay struct{ Other string }

func (e ErrOtherRelay) Error() string {
	return fmt.Sprintf("relay %q is running on this SQLite database, and SQLite supports one relay per database", e.Other)
}

// Holding is what a relay holds after a heartbeat: how many partitions it owns, the share it
// aims at, and the number of live relays that share was computed for.
type Holding struct {
	Owned, Share, Relays int
}

// Heartbeat renews this relay's presence and leases and rebalances the partitions. It returns
// how many partitions the relay owns afterwards. Of the partitions above its share, it releases
// those releasable returns (all of them when releasable is nil).
func (s *Store) Heartbeat(ctx context.Context, db *sql.DB, owner string, ttl time.Duration, policy SharePolicy,
	releasable func([]int) []int) (int, error) {
	h, err := s.Rebalance(ctx, db, owner, ttl, policy, releasable)
	return h.Owned, err
}

// Rebalance is heartbeat, returning the relay's holding.
func (s *Store) Rebalance(ctx context.Context, db *sql.DB, owner string, ttl time.Duration, policy SharePolicy,
	releasable func([]int) []int) (Holding, error) {
	registered, err := s.RegisterRelay(ctx, db, owner, ttl)
	if err != nil {
		return Holding{}, err
	}
	if !registered {
		other, err := s.OtherRelay(ctx, db, owner, ttl)
		if err != nil {
			return Holding{}, err
		}
		return Holding{}, ErrOtherRelay{other}
	}
	if _, err := s.SQL().ForgetDeadRelays(ttl).Exec(ctx, db); err != nil {
		return Holding{}, fmt.Errorf("forget dead relays: %w", err)
	}
	var relays int
	if err := s.SQL().CountRelays().QueryRow(ctx, db).Scan(&relays); err != nil {
		return Holding{}, fmt.Errorf("count relays: %w", err)
	}
	share := policy.Share(relays)
	h := Holding{Share: share, Relays: relays}
	owned, err := s.Renew(ctx, db, owner, ttl)
	if err != nil {
		return h, err
	}
	owned, partial := policy.Whole(owned)
	switch {
	case len(owned) > share || len(partial) > 0:
		surplus := partial
		if len(owned) > share {
			surplus = append(surplus, owned[share:]...)
		}
		owned = append(owned, partial...)
		if releasable != nil {
			surplus = releasable(surplus)
		}
		released, err := s.Release(ctx, db, owner, surplus)
		h.Owned = len(owned) - released
		return h, err
	case len(owned) < share:
		taken, err := s.Acquire(ctx, db, owner, share-len(owned), ttl, policy)
		h.Owned = len(owned) + taken
		return h, err
	}
	h.Owned = len(owned)
	return h, nil
}

// Renew extends this relay's leases by ttl from the database's now and returns the partitions
// it still owns, in ascending order.
func (s *Store) Renew(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) ([]int, error) {
	candidates, err := s.OwnedPartitions(ctx, db, owner)
	if err != nil || len(candidates) == 0 {
		return nil, err
	}
	var owned []int
	err = s.InLeaseTx(ctx, db, func(tx *sql.Tx) error {
		locked, err := s.LockLeases(ctx, tx, candidates, false)
		if err != nil {
			return err
		}
		for _, p := range candidates {
			if locked[p].Owner == owner {
				owned = append(owned, p)
			}
		}
		if len(owned) == 0 {
			return nil
		}
		_, err = s.SQL().Renew(owner, ttl, owned).Exec(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return owned, nil
}

// Release gives up the partitions (graceful shutdown, or above the relay's share).
func (s *Store) Release(ctx context.Context, db *sql.DB, owner string, partitions []int) (int, error) {
	if len(partitions) == 0 {
		return 0, nil
	}
	var released int64
	err := s.InLeaseTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := s.LockLeases(ctx, tx, partitions, false); err != nil {
			return err
		}
		res, err := s.SQL().Release(owner, partitions).Exec(ctx, tx)
		if err != nil {
			return err
		}
		released, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release leases: %w", err)
	}
	return int(released), nil
}

// Acquire takes up to n free or expired partitions and increments their epochs, which fences
// the previous owner. Candidates locked by another transaction are skipped, so acquiring never
// waits.
func (s *Store) Acquire(ctx context.Context, db *sql.DB, owner string, n int, ttl time.Duration, policy SharePolicy) (int, error) {
	candidates, err := s.SQL().FreeLeases(policy.Candidates(n)).Ints(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("find free leases: %w", err)
	}
	candidates, _ = policy.Whole(candidates)
	candidates = candidates[:min(len(candidates), n)]
	if len(candidates) == 0 {
		return 0, nil
	}
	var taken int64
	err = s.InLeaseTx(ctx, db, func(tx *sql.Tx) error {
		locked, err := s.LockLeases(ctx, tx, candidates, true)
		if err != nil || len(locked) == 0 {
			return err
		}
		parts := make([]int, 0, len(locked))
		for _, p := range candidates {
			if _, ok := locked[p]; ok {
				parts = append(parts, p)
			}
		}
		// A granule some of whose rows another transaction holds is left whole.
		if parts, _ = policy.Whole(parts); len(parts) == 0 {
			return nil
		}
		res, err := s.SQL().Acquire(owner, ttl, parts).Exec(ctx, tx)
		if err != nil {
			return err
		}
		taken, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("take leases: %w", err)
	}
	return int(taken), nil
}
