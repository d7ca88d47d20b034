package admin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// WALStatus is the wal source's state (docs/wal.md): its slot, how far the streaming relay is,
// and the parked keys, whose events wait in the outbox table.
type WALStatus struct {
	// WALSlotState is the slot as the register and pg_replication_slots see it: Registered,
	// Exists, WALStatus, Active, ConfirmedLSN (the position the slot will restart from), LagBytes
	// (the WAL between the server's position and ConfirmedLSN: what the slot pins, and what a
	// loss would lose), SafeWALBytes; Usable and Lost tell whether writers may emit.
	outbox.WALSlotState
	// ActivePID is the walsender of the relay streaming the slot (0: none).
	ActivePID int
	// ServerLSN is the server's current WAL position.
	ServerLSN string
	// RelayLSN is the position before which the streaming relay has published or parked every
	// event, as it last reported it (every forwarder.wal status_interval) at RelayReportedAt;
	// SentLSN is the WAL the server has sent it. Both are empty while no relay streams the slot,
	// or when the role may not read them (pg_read_all_stats).
	RelayLSN, SentLSN string
	RelayReportedAt   time.Time
	// ParkedKeys counts the parked keys (a key with a pending or dead row in the table); Parked
	// lists the oldest of them (at most the limit asked for) with their rows.
	ParkedKeys int64
	Parked     []ParkedKey
}

// ParkedKey is a key of the wal source parked in the outbox table: its events are relayed from
// the table (retries, dead letters) until it has no row left, then stream directly again.
type ParkedKey struct {
	Key Key
	// Rows are its rows in the table, Dead the dead-lettered ones among them; Oldest is the
	// created_at of the oldest.
	Rows, Dead int64
	Oldest     time.Time
}

// WAL returns the state of the wal source streaming slot (forwarder.WALSlotName or
// forwarder.wal_slot) and up to limit parked keys, oldest first (PostgreSQL only).
func (a *Admin) WAL(ctx context.Context, slot string, limit int) (WALStatus, error) {
	if !a.sql().Replicates() {
		return WALStatus{}, fmt.Errorf("admin: the wal source needs the postgres dialect, the table is %s", a.dialect)
	}
	if limit <= 0 {
		return WALStatus{}, fmt.Errorf("admin: wal: the limit of parked keys must be positive, got %d", limit)
	}
	st, err := outbox.ReadWALSlot(ctx, a.db, a.table, slot)
	if err != nil {
		return WALStatus{}, fmt.Errorf("admin: %w", err)
	}
	out := WALStatus{WALSlotState: st}
	if err := a.readWALRelay(ctx, &out); err != nil {
		return WALStatus{}, err
	}
	if err := a.readParkedKeys(ctx, &out, limit); err != nil {
		return WALStatus{}, err
	}
	return out, nil
}

// readWALRelay reads the server's position and what the slot's walsender knows of its relay.
func (a *Admin) readWALRelay(ctx context.Context, out *WALStatus) error {
	var pid sql.NullInt64
	var sent, flushed sql.NullString
	var replied sql.NullTime
	err := a.db.QueryRowContext(ctx, "SELECT pg_catalog.pg_current_wal_lsn()::text, s.active_pid, r.sent_lsn::text,"+
		" r.flush_lsn::text, r.reply_time FROM (SELECT 1) AS one"+
		" LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1"+
		" LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid", out.Slot).
		Scan(&out.ServerLSN, &pid, &sent, &flushed, &replied)
	if err != nil {
		return fmt.Errorf("admin: read the walsender of replication slot %s: %w", out.Slot, err)
	}
	out.ActivePID, out.SentLSN, out.RelayLSN = int(pid.Int64), sent.String, flushed.String
	if replied.Valid {
		out.RelayReportedAt = replied.Time.UTC()
	}
	return nil
}

// readParkedKeys reads the parked keys, oldest first, and how many there are.
func (a *Admin) readParkedKeys(ctx context.Context, out *WALStatus, limit int) error {
	rows, err := a.sql().WAL().ParkedKeyRows(limit).Query(ctx, a.db)
	if err != nil {
		return fmt.Errorf("admin: read the parked keys of %s: %w", a.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k ParkedKey
		oldest, getOldest := outbox.TimeScanner()
		if err := rows.Scan(&k.Key.TenantID, &k.Key.AggregateType, &k.Key.AggregateID, &k.Rows, &k.Dead, oldest, &out.ParkedKeys); err != nil {
			return fmt.Errorf("admin: read the parked keys of %s: %w", a.table, err)
		}
		if k.Oldest, err = getOldest(); err != nil {
			return fmt.Errorf("admin: read the parked keys of %s: %w", a.table, err)
		}
		out.Parked = append(out.Parked, k)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("admin: read the parked keys of %s: %w", a.table, err)
	}
	return nil
}
