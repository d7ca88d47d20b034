package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Leases: the outbox is split into outbox.Partitions partitions by the hash of each event's
// ordering key. Each partition of a lease group is owned by at most one relay at a time: a row
// in the leases table with the owner and an expiry, renewed by heartbeats. Every relay aims at
// an equal share (partitions / live relays, rounded up): it releases what it holds above its
// share and takes free or expired partitions below it. A relay that dies stops renewing; its
// partitions expire and the others take them over. Within a partition one relay publishes in
// sequence order, so events of one key keep their order across relays, restarts and takeovers.

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

// heartbeat renews this relay's presence and leases and rebalances the partitions. It returns
// how many partitions the relay owns afterwards.
func (s *store) heartbeat(ctx context.Context, db *sql.DB, owner string, ttl time.Duration) (int, error) {
	now := time.Now()
	expires := s.dialect.TimeArg(now.Add(ttl))
	var upsert string
	switch s.dialect {
	case outbox.Postgres:
		upsert = "INSERT INTO " + s.table.Relays() + " (lease_group, owner, heartbeat_at) VALUES (?, ?, ?) " +
			"ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at"
	case outbox.MySQL:
		upsert = "INSERT INTO " + s.table.Relays() + " (lease_group, owner, heartbeat_at) VALUES (?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)"
	default:
		upsert = "INSERT INTO " + s.table.Relays() + " (lease_group, owner, heartbeat_at) VALUES (?, ?, ?) " +
			"ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
	}
	if _, err := db.ExecContext(ctx, s.q(upsert), s.group, owner, s.dialect.TimeArg(now)); err != nil {
		return 0, fmt.Errorf("register relay: %w", err)
	}
	if _, err := db.ExecContext(ctx, s.q("DELETE FROM "+s.table.Relays()+" WHERE lease_group = ? AND heartbeat_at < ?"),
		s.group, s.dialect.TimeArg(now.Add(-ttl))); err != nil {
		return 0, fmt.Errorf("forget dead relays: %w", err)
	}
	var relays int
	if err := db.QueryRowContext(ctx, s.q("SELECT COUNT(*) FROM "+s.table.Relays()+" WHERE lease_group = ?"),
		s.group).Scan(&relays); err != nil {
		return 0, fmt.Errorf("count relays: %w", err)
	}
	relays = max(relays, 1)
	share := (outbox.Partitions + relays - 1) / relays

	res, err := db.ExecContext(ctx, s.q("UPDATE "+s.table.Leases()+" SET expires_at = ? WHERE lease_group = ? AND owner = ?"),
		expires, s.group, owner)
	if err != nil {
		return 0, fmt.Errorf("renew leases: %w", err)
	}
	owned64, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("renew leases: %w", err)
	}
	owned := int(owned64)
	switch {
	case owned > share:
		released, err := s.release(ctx, db, owner, owned-share)
		if err != nil {
			return owned, err
		}
		owned -= released
	case owned < share:
		taken, err := s.acquire(ctx, db, owner, share-owned, now, expires)
		if err != nil {
			return owned, err
		}
		owned += taken
	}
	return owned, nil
}

// release gives up n of the relay's partitions, the highest-numbered first.
func (s *store) release(ctx context.Context, db *sql.DB, owner string, n int) (int, error) {
	parts, err := s.ownedPartitions(ctx, db, owner)
	if err != nil {
		return 0, err
	}
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	if len(parts) == 0 {
		return 0, nil
	}
	query := "UPDATE " + s.table.Leases() + " SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ? AND partition_no IN " + in(len(parts))
	args := append([]any{s.dialect.TimeArg(time.Unix(0, 0)), s.group, owner}, intArgs(parts)...)
	res, err := db.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, fmt.Errorf("release leases: %w", err)
	}
	released, err := res.RowsAffected()
	return int(released), err
}

// acquire takes up to n free or expired partitions. Candidates locked by another relay's
// in-flight batch are skipped (SKIP LOCKED), so acquiring never waits on a busy relay.
func (s *store) acquire(ctx context.Context, db *sql.DB, owner string, n int, now time.Time, expires any) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("acquire leases: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	query := "SELECT partition_no FROM " + s.table.Leases() +
		" WHERE lease_group = ? AND (owner IS NULL OR expires_at < ?) ORDER BY partition_no LIMIT ?"
	if s.dialect != outbox.SQLite {
		query += " FOR UPDATE SKIP LOCKED"
	}
	parts, err := queryInts(ctx, tx, s.q(query), s.group, s.dialect.TimeArg(now), n)
	if err != nil {
		return 0, fmt.Errorf("find free leases: %w", err)
	}
	if len(parts) == 0 {
		return 0, nil
	}
	update := "UPDATE " + s.table.Leases() + " SET owner = ?, expires_at = ? WHERE lease_group = ? AND (owner IS NULL OR expires_at < ?) AND partition_no IN " + in(len(parts))
	args := append([]any{owner, expires, s.group, s.dialect.TimeArg(now)}, intArgs(parts)...)
	res, err := tx.ExecContext(ctx, s.q(update), args...)
	if err != nil {
		return 0, fmt.Errorf("take leases: %w", err)
	}
	taken, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("take leases: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("take leases: %w", err)
	}
	return int(taken), nil
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
	if _, err := db.ExecContext(ctx, s.q("UPDATE "+s.table.Leases()+" SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ?"),
		s.dialect.TimeArg(time.Unix(0, 0)), s.group, owner); err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	if _, err := db.ExecContext(ctx, s.q("DELETE FROM "+s.table.Relays()+" WHERE lease_group = ? AND owner = ?"), s.group, owner); err != nil {
		return fmt.Errorf("unregister relay: %w", err)
	}
	return nil
}
