package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The statements of the wal source (PostgreSQL only: its configuration refuses other
// dialects). The stream writes nothing; these run only for parked keys: the events of a key
// whose event failed are written into the table, where the polling machinery takes them, and
// the source reads which keys still have rows there.

// WALStatements are the wal source's statements of one table.
type WALStatements struct{ s Statements }

// WAL returns the wal source's statements.
func (s Statements) WAL() WALStatements { return WALStatements{s} }

// ParkedRow is one event the wal source parks in the table, with the state of its failure (a
// later event of a parked key has none: Attempts 0, no next attempt).
type ParkedRow struct {
	Event     outbox.Event
	KeyHash   int64
	Partition int
	Attempts  int
	Next      time.Time // zero: no next attempt time
	Dead      bool
	Reason    string
}

// Park inserts row unless a row of its key with its event id is in the table already (a
// re-streamed event parked before a crash) or an operator discarded the event (its tombstone,
// schema v13: a re-streamed event whose dead row was discarded). key_hash is set, so the plain-SQL writers' trigger
// (migration 7) leaves the row alone; its seq is drawn at insert, so a key's rows parked in
// stream order are claimed in that order.
func (w WALStatements) Park(row ParkedRow) (Query, error) {
	headers := []byte("{}")
	if len(row.Event.Headers) > 0 {
		var err error
		if headers, err = json.Marshal(row.Event.Headers); err != nil {
			return Query{}, fmt.Errorf("event %s: headers: %w", row.Event.ID, err)
		}
	}
	status := StatusPending
	if row.Dead {
		status = StatusDead
	}
	var next, reason any
	if !row.Next.IsZero() {
		next = w.s.d.TimeArg(row.Next)
	}
	if row.Reason != "" {
		reason = row.Reason
	}
	e, t := row.Event, w.s.table.Events()
	return w.s.q("INSERT INTO "+t+" (event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers,"+
		" key_hash, partition_no, created_at, status, attempts, next_attempt_at, last_error)"+
		" SELECT ?::uuid, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?::timestamptz, ?"+
		" WHERE NOT EXISTS (SELECT 1 FROM "+t+" WHERE partition_no = ? AND key_hash = ? AND event_id = ?::uuid)"+
		" AND NOT EXISTS (SELECT 1 FROM "+w.s.table.WALDiscarded()+" WHERE event_id = ?::uuid)",
		e.ID.String(), e.Topic, e.AggregateType, e.AggregateID, e.EventType, e.TenantID, e.Payload, string(headers),
		row.KeyHash, row.Partition, w.s.d.TimeArg(e.CreatedAt), status, row.Attempts, next, reason,
		row.Partition, row.KeyHash, e.ID.String(), e.ID.String()), nil
}

// ParkedKeys returns the key hashes with a row in the table that holds their key back: pending
// or dead.
func (w WALStatements) ParkedKeys() Query {
	return w.s.q("SELECT DISTINCT key_hash FROM " + w.s.table.Events() + " WHERE status IN (0, 2)")
}

// ParkedKeyRows counts, per parked key (a key with a pending or dead row), its rows in the
// table and the dead ones among them, with the oldest row's created_at and the total of parked
// keys, oldest first, at most limit keys (the admin's view of the wal source).
func (w WALStatements) ParkedKeyRows(limit int) Query {
	scope, args := w.s.tenantScope()
	return w.s.q("SELECT tenant_id, aggregate_type, aggregate_id, count(*), count(*) FILTER (WHERE status = 2),"+
		" min(created_at), count(*) OVER () FROM "+w.s.table.Events()+" WHERE status IN (0, 2)"+scope+
		" GROUP BY tenant_id, aggregate_type, aggregate_id ORDER BY min(seq) LIMIT ?", append(args, limit)...)
}

// PruneDiscarded deletes the tombstones of discarded events that the slot's confirmed position
// passed: no session of the slot can stream those events again.
func (w WALStatements) PruneDiscarded(slot string) Query {
	return w.s.q("DELETE FROM "+w.s.table.WALDiscarded()+" WHERE discarded_lsn <="+
		" (SELECT confirmed_flush_lsn FROM pg_catalog.pg_replication_slots WHERE slot_name = ?)", slot)
}
