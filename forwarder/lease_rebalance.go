package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The heartbeat of the lease protocol (lease.go): a relay registers itself, renews its leases,
// and, by its sharePolicy, releases what it holds above its share or takes free or expired
// partitions below it.

// registerRelay records this relay's heartbeat at the database's time. On SQLite, which
// supports one relay per database, it refuses (registered false) while another relay's
// heartbeat is younger than ttl; the check and the insert are one statement, so two relays
// starting together cannot both pass.
func (s *store) registerRelay(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (registered bool, err error) {
	query, exclusive := s.sql().RegisterRelay(owner, ttl)
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

// otherRelay names a live relay other than owner (SQLite's one-relay check), or "" if none.
func (s *store) otherRelay(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (string, error) {
	var other string
	err := s.sql().OtherRelay(owner, ttl).QueryRow(ctx, db).Scan(&other)
	if err == sql.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for other relays: %w", err)
	}
	return other, nil
}

// errOtherRelay is returned by heartbeat on SQLite while another relay runs on the database.
type errOtherRelay struct{ other string }

func (e errOtherRelay) Error() string {
	return fmt.Sprintf("relay %q is running on this SQLite database, and SQLite supports one relay per database", e.other)
}

// holding is what a relay holds after a heartbeat: how many partitions it owns, the share it
// aims at, and the number of live relays that share was computed for.
type holding struct {
	owned, share, relays int
}

// heartbeat renews this relay's presence and leases and rebalances the partitions. It returns
// how many partitions the relay owns afterwards. Of the partitions above its share, it releases
// those releasable returns (all of them when releasable is nil).
func (s *store) heartbeat(ctx context.Context, db *sql.DB, owner string, ttl time.Duration, policy sharePolicy,
	releasable func([]int) []int) (int, error) {
	h, err := s.rebalance(ctx, db, owner, ttl, policy, releasable)
	return h.owned, err
}

// rebalance is heartbeat, returning the relay's holding.
func (s *store) rebalance(ctx context.Context, db *sql.DB, owner string, ttl time.Duration, policy sharePolicy,
	releasable func([]int) []int) (holding, error) {
	registered, err := s.registerRelay(ctx, db, owner, ttl)
	if err != nil {
		return holding{}, err
	}
	if !registered {
		other, err := s.otherRelay(ctx, db, owner, ttl)
		if err != nil {
			return holding{}, err
		}
		return holding{}, errOtherRelay{other}
	}
	if _, err := s.sql().ForgetDeadRelays(ttl).Exec(ctx, db); err != nil {
		return holding{}, fmt.Errorf("forget dead relays: %w", err)
	}
	var relays int
	if err := s.sql().CountRelays().QueryRow(ctx, db).Scan(&relays); err != nil {
		return holding{}, fmt.Errorf("count relays: %w", err)
	}
	share := policy.share(relays)
	h := holding{share: share, relays: relays}
	owned, err := s.renew(ctx, db, owner, ttl)
	if err != nil {
		return h, err
	}
	owned, partial := policy.whole(owned)
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
		released, err := s.release(ctx, db, owner, surplus)
		h.owned = len(owned) - released
		return h, err
	case len(owned) < share:
		taken, err := s.acquire(ctx, db, owner, share-len(owned), ttl, policy)
		h.owned = len(owned) + taken
		return h, err
	}
	h.owned = len(owned)
	return h, nil
}

// renew extends this relay's leases by ttl from the database's now and returns the partitions
// it still owns, in ascending order.
func (s *store) renew(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) ([]int, error) {
	candidates, err := s.ownedPartitions(ctx, db, owner)
	if err != nil || len(candidates) == 0 {
		return nil, err
	}
	var owned []int
	err = s.inLeaseTx(ctx, db, func(tx *sql.Tx) error {
		locked, err := s.lockLeases(ctx, tx, candidates, false)
		if err != nil {
			return err
		}
		for _, p := range candidates {
			if locked[p].owner == owner {
				owned = append(owned, p)
			}
		}
		if len(owned) == 0 {
			return nil
		}
		_, err = s.sql().Renew(owner, ttl, owned).Exec(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return owned, nil
}

// release gives up the partitions (graceful shutdown, or above the relay's share).
func (s *store) release(ctx context.Context, db *sql.DB, owner string, partitions []int) (int, error) {
	if len(partitions) == 0 {
		return 0, nil
	}
	var released int64
	err := s.inLeaseTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := s.lockLeases(ctx, tx, partitions, false); err != nil {
			return err
		}
		res, err := s.sql().Release(owner, partitions).Exec(ctx, tx)
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

// acquire takes up to n free or expired partitions and increments their epochs, which fences
// the previous owner. Candidates locked by another transaction are skipped, so acquiring never
// waits.
func (s *store) acquire(ctx context.Context, db *sql.DB, owner string, n int, ttl time.Duration, policy sharePolicy) (int, error) {
	limit := n
	if policy.units > 0 {
		limit = outbox.Partitions // whole units are picked below
	}
	candidates, err := s.sql().FreeLeases(limit).Ints(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("find free leases: %w", err)
	}
	if policy.units > 0 {
		candidates, _ = policy.whole(candidates)
		candidates = candidates[:min(len(candidates), n)]
	}
	if len(candidates) == 0 {
		return 0, nil
	}
	var taken int64
	err = s.inLeaseTx(ctx, db, func(tx *sql.Tx) error {
		locked, err := s.lockLeases(ctx, tx, candidates, true)
		if err != nil || len(locked) == 0 {
			return err
		}
		parts := make([]int, 0, len(locked))
		for _, p := range candidates {
			if _, ok := locked[p]; ok {
				parts = append(parts, p)
			}
		}
		if policy.units > 0 {
			// A unit some of whose rows another transaction holds is left whole.
			if parts, _ = policy.whole(parts); len(parts) == 0 {
				return nil
			}
		}
		res, err := s.sql().Acquire(owner, ttl, parts).Exec(ctx, tx)
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
