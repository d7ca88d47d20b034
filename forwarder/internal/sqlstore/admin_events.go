package sqlstore

import (
	"strings"
	"time"
)

// The operator's statements on blocked keys and dead letters (forwarder/admin.Admin's filtered
// listings and actions). A blocked key's head is its first dead or failed row; skipped rows
// (StatusSkipped) are listed and acted on with the dead ones.

// EntryColumns are the columns of a listed row, in order.
const EntryColumns = "seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status"

// Filter selects rows: every field set narrows the selection (they combine with AND).
type Filter struct {
	Topic, EventType, TenantID string
	// Key selects the rows of one ordering key.
	Key      *FilterKey
	EventIDs []string
	// Since and Until bound created_at: Since <= created_at < Until (zero: unbounded).
	Since, Until time.Time
}

// FilterKey is an ordering key and its hash (the key_hash column, indexed).
type FilterKey struct {
	Hash                                 int64
	TenantID, AggregateType, AggregateID string
}

// where returns the conditions of f and of the Statements' tenants (each starting with " AND ")
// and their arguments; alias qualifies the columns ("" for none, "h." for a table aliased h).
func (s Statements) where(f Filter, alias string) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	add := func(cond string, values ...any) {
		b.WriteString(" AND " + strings.ReplaceAll(cond, "@", alias))
		args = append(args, values...)
	}
	if len(s.tenants) > 0 {
		add("@tenant_id IN "+in(len(s.tenants)), stringArgs(s.tenants)...)
	}
	if f.Topic != "" {
		add("@topic = ?", f.Topic)
	}
	if f.EventType != "" {
		add("@event_type = ?", f.EventType)
	}
	if f.TenantID != "" {
		add("@tenant_id = ?", f.TenantID)
	}
	if k := f.Key; k != nil {
		add("@key_hash = ? AND @tenant_id = ? AND @aggregate_type = ? AND @aggregate_id = ?",
			k.Hash, k.TenantID, k.AggregateType, k.AggregateID)
	}
	if len(f.EventIDs) > 0 {
		add("@event_id IN "+in(len(f.EventIDs)), stringArgs(f.EventIDs)...)
	}
	if !f.Since.IsZero() {
		add("@created_at >= ?", s.d.TimeArg(f.Since))
	}
	if !f.Until.IsZero() {
		add("@created_at < ?", s.d.TimeArg(f.Until))
	}
	return b.String(), args
}

// BlockedKeys selects up to limit heads of blocked keys matching f after seq after, in seq
// order: EntryColumns (of the head), key_hash, partition_no, next_attempt_at, and the number
// of the key's pending rows behind the head. The relay parks keys by key_hash, so this groups
// by it too.
func (s Statements) BlockedKeys(f Filter, after int64, limit int) Query {
	events := s.table.Events()
	where, args := s.where(f, "h.")
	return s.q("SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts,"+
		" COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at,"+
		" (SELECT COUNT(*) FROM "+events+" w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq)"+
		" FROM "+events+" h JOIN (SELECT key_hash, MIN(seq) AS head FROM "+events+
		" WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head"+
		" WHERE h.seq > ?"+where+" ORDER BY h.seq LIMIT ?", append(append([]any{after}, args...), limit)...)
}

// Letters selects EntryColumns of up to limit dead and skipped rows matching f after seq
// after, in seq order.
func (s Statements) Letters(f Filter, after int64, limit int) Query {
	where, args := s.where(f, "")
	return s.q("SELECT "+EntryColumns+" FROM "+s.table.Events()+" WHERE status IN (2, 3)"+where+" AND seq > ? ORDER BY seq LIMIT ?",
		append(args, after, limit)...)
}

// Event selects EntryColumns, payload, headers, key_hash, partition_no and next_attempt_at of
// the row of the event id (of the Statements' tenants, when set).
func (s Statements) Event(eventID string) Query {
	scope, args := s.tenantScope()
	return s.q("SELECT "+EntryColumns+", payload, headers, key_hash, partition_no, next_attempt_at FROM "+
		s.table.Events()+" WHERE event_id = ?"+scope, append([]any{eventID}, args...)...)
}

// tenantScope returns " AND tenant_id IN (...)" and its arguments when the Statements have
// tenants, else nothing: the operator's listings and actions of a relay stay within its tenants.
func (s Statements) tenantScope() (string, []any) {
	if len(s.tenants) == 0 {
		return "", nil
	}
	return " AND tenant_id IN " + in(len(s.tenants)), stringArgs(s.tenants)
}

// SkipHeads makes the rows seqs (not empty) that are dead or failed skipped.
func (s Statements) SkipHeads(seqs []any) Query {
	scope, args := s.tenantScope()
	return s.q("UPDATE "+s.table.Events()+" SET status = 3, next_attempt_at = NULL WHERE seq IN "+
		in(len(seqs))+" AND (status = 2 OR (status = 0 AND attempts > 0))"+scope, append(append([]any{}, seqs...), args...)...)
}

// ReplayLetters makes the dead and skipped rows seqs (not empty) pending again with fresh
// attempts and a next attempt time (now): the cdc source leaves keys with one to its retry
// path, which publishes them in order.
func (s Statements) ReplayLetters(seqs []any) Query {
	scope, args := s.tenantScope()
	return s.q("UPDATE "+s.table.Events()+" SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL"+
		" WHERE status IN (2, 3) AND seq IN "+in(len(seqs))+scope, append(append([]any{s.nowArg()}, seqs...), args...)...)
}

// DiscardLetters deletes the dead and skipped rows seqs (not empty).
func (s Statements) DiscardLetters(seqs []any) Query {
	scope, args := s.tenantScope()
	return s.q("DELETE FROM "+s.table.Events()+" WHERE status IN (2, 3) AND seq IN "+in(len(seqs))+scope, append(append([]any{}, seqs...), args...)...)
}

// ReleaseKeys gives the pending rows of the keys (their hashes, not empty) that have no next
// attempt time one (now), so that the cdc source leaves them to its retry path, in order.
func (s Statements) ReleaseKeys(hashes []any) Query {
	return s.q("UPDATE "+s.releasedRows()+" WHERE status = 0 AND next_attempt_at IS NULL"+
		" AND key_hash IN "+in(len(hashes)), append([]any{s.nowArg()}, hashes...)...)
}

// releasedRows is the table and SET clause of an UPDATE that hands rows to the cdc retry path
// for an operator's action (ReleaseKeys, MarkKeysOfDead): a next attempt time (now, the first
// argument) and, where the database streams its changes, the latest commit position among the
// rows of the row's key that the stream already left there with a lower seq. A row the stream has
// not read yet would otherwise sort first (no position) and overtake them; a row with no such
// row before it (one the table drain left) still sorts first.
func (s Statements) releasedRows() string {
	events := s.table.Events()
	if _, ok := s.d.(Replicator); !ok {
		return events + " SET next_attempt_at = ?"
	}
	return events + " AS e SET next_attempt_at = ?, commit_lsn = (SELECT MAX(p.commit_lsn) FROM " + events +
		" p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL)"
}

// Relays selects lease_group, owner and heartbeat_at of every registered relay.
func (s Statements) Relays() Query {
	return s.q("SELECT lease_group, owner, heartbeat_at FROM " + s.table.Relays())
}

// Leases selects lease_group, partition_no, owner ("" for none), whether it expired (by this
// process's clock) and epoch of every lease row, by group and partition.
func (s Statements) Leases() Query {
	return s.q("SELECT lease_group, partition_no, COALESCE(owner, ''), expires_at < ?, epoch FROM "+
		s.table.Leases()+" ORDER BY lease_group, partition_no", s.nowArg())
}
