package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Row statuses, as stored in the outbox table's status column.
const (
	StatusPending   = sqlstore.StatusPending
	StatusPublished = sqlstore.StatusPublished
	StatusDead      = sqlstore.StatusDead
)

// Querier is what *sql.DB and *sql.Tx have in common.
type Querier = sqlstore.Querier

// Store runs the forwarder's statements for one outbox table and reads their rows; the
// statements themselves, and what differs between databases, are internal/sqlstore's.
type Store struct {
	Table   outbox.Table
	Dialect outbox.Dialect // the table's
	Group   string
	Tenants []string
	// idleTimeout bounds how long a transaction locking lease rows may stay idle (inLeaseTx).
	IdleTimeout time.Duration
	// plans is the plan generation of the statements sent for every batch.
	Plans Replanner
}

// SQL returns the statements of the store's table, lease group and tenants.
func (s *Store) SQL() sqlstore.Statements { return sqlstore.New(s.Table, s.Group, s.Tenants) }

// Record is one claimed outbox row.
type Record struct {
	Seq       int64
	Event     outbox.Event
	KeyHash   int64
	Attempts  int
	Partition int
	// commitLSN is the end of the row's transaction in the WAL, for a row the cdc stream
	// decoded (0 for a row claimed from the table).
	CommitLSN int64
}

// Claim reads pending rows of the partitions in sequence order, leaving out every key held back
// by a failing (not yet due) or dead event, at most limit rows and no more than fit in maxBytes
// of payload (the first row always): sqlstore.Statements.Claim. No row locks are taken and no
// transaction is held: the lease epochs fence the acknowledgement instead (see fence).
func (s *Store) Claim(ctx context.Context, q Querier, partitions []int, limit int, maxBytes int64) ([]Record, error) {
	records, err := s.ClaimWith(ctx, q, s.SQL().Claim(partitions, limit, maxBytes))
	if err != nil {
		return nil, fmt.Errorf("claim rows: %w", err)
	}
	return records, nil
}

// ClaimWith runs a claim in the statements' plan generation and notes the batch's size: a
// large batch moves the next statements to new plans (replanner).
func (s *Store) ClaimWith(ctx context.Context, q Querier, claim sqlstore.Query) ([]Record, error) {
	rows, err := s.Planned(claim).Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	records, err := ScanRecords(rows)
	s.Plans.Observe(len(records), BatchBytes(records))
	return records, err
}

// Planned returns q, a statement on the events sent for every batch, in the plan generation of
// such statements (replanner).
func (s *Store) Planned(q sqlstore.Query) sqlstore.Query { return q.InGeneration(s.Plans.Current()) }

// ClaimQuery is claim's statement, in the dialect's placeholders, and its arguments.
func (s *Store) ClaimQuery(partitions []int, limit int, maxBytes int64) (string, []any) {
	st := s.SQL().Claim(partitions, limit, maxBytes)
	return st.SQL, st.Args
}

// ScanRecords reads the rows of a claim (sqlstore.ClaimColumns).
func ScanRecords(rows *sql.Rows) ([]Record, error) {
	var out []Record
	for rows.Next() {
		var (
			r       Record
			eventID string
			headers []byte
		)
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&r.Seq, &eventID, &r.Event.Topic, &r.Event.AggregateType, &r.Event.AggregateID,
			&r.Event.EventType, &r.Event.TenantID, &r.Event.Payload, &headers, &r.KeyHash, created, &r.Attempts, &r.Partition); err != nil {
			return nil, fmt.Errorf("read row: %w", err)
		}
		id, err := uuid.Parse(eventID)
		if err != nil {
			return nil, fmt.Errorf("row %d: event id %q: %w", r.Seq, eventID, err)
		}
		r.Event.ID = id
		if r.Event.CreatedAt, err = getCreated(); err != nil {
			return nil, fmt.Errorf("row %d: created_at: %w", r.Seq, err)
		}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &r.Event.Headers); err != nil {
				return nil, fmt.Errorf("row %d: headers: %w", r.Seq, err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Ack removes (or, with retention, marks published) the rows the broker acknowledged.
func (s *Store) Ack(ctx context.Context, q Querier, seqs []int64, retain bool) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.Planned(s.SQL().Ack(seqs, retain)).Exec(ctx, q); err != nil {
		return fmt.Errorf("ack %d rows: %w", len(seqs), err)
	}
	return nil
}

// Fail records a failed attempt: the row stays pending until nextAttempt, or becomes dead.
func (s *Store) Fail(ctx context.Context, q Querier, seq int64, attempts int, nextAttempt time.Time, dead bool, reason string) error {
	reason = TruncateUTF8(reason, MaxReasonBytes)
	if _, err := s.Planned(s.SQL().Fail(seq, attempts, nextAttempt, dead, reason)).Exec(ctx, q); err != nil {
		return fmt.Errorf("record failure of row %d: %w", seq, err)
	}
	return nil
}

// maxReasonBytes bounds the last_error stored with a failed row.
const MaxReasonBytes = 2000

// Prune deletes up to limit published rows older than cutoff and reports how many it deleted.
func (s *Store) Prune(ctx context.Context, q Querier, cutoff time.Time, limit int) (int64, error) {
	res, err := s.SQL().Prune(cutoff, limit).Exec(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("prune published rows: %w", err)
	}
	return res.RowsAffected()
}

// TenantStats is one line of the pending-rows gauges. Oldest is the earliest time a pending row became due (its created_at, or a released
// scheduled event's deliver_at).
type TenantStats struct {
	Tenant        string
	Pending, Dead int64
	Oldest        time.Time
}

func (s *Store) Stats(ctx context.Context, q Querier) ([]TenantStats, error) {
	rows, err := s.SQL().Stats().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read outbox stats: %w", err)
	}
	defer rows.Close()
	byTenant := map[string]*TenantStats{}
	var out []TenantStats
	for rows.Next() {
		var (
			tenant string
			status int
			count  int64
		)
		oldest, getOldest := outbox.TimeScanner()
		if err := rows.Scan(&tenant, &status, &count, oldest); err != nil {
			return nil, fmt.Errorf("read outbox stats: %w", err)
		}
		st := byTenant[tenant]
		if st == nil {
			st = &TenantStats{Tenant: tenant}
			byTenant[tenant] = st
		}
		if status == StatusDead {
			st.Dead = count
			continue
		}
		st.Pending = count
		if st.Oldest, err = getOldest(); err != nil {
			return nil, err
		}
	}
	for _, st := range byTenant {
		out = append(out, *st)
	}
	return out, rows.Err()
}
