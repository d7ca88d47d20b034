package forwarder

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Row statuses, as stored in the outbox table's status column.
const (
	statusPending   = sqlstore.StatusPending
	statusPublished = sqlstore.StatusPublished
	statusDead      = sqlstore.StatusDead
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier = sqlstore.Querier

// store runs the forwarder's statements for one outbox table and reads their rows; the
// statements themselves, and what differs between databases, are internal/sqlstore's.
type store struct {
	table   outbox.Table
	dialect outbox.Dialect // the table's
	group   string
	tenants []string
	// idleTimeout bounds how long a transaction locking lease rows may stay idle (inLeaseTx).
	idleTimeout time.Duration
	// plans is the plan generation of the statements sent for every batch.
	plans replanner
}

// sql returns the statements of the store's table, lease group and tenants.
func (s *store) sql() sqlstore.Statements { return sqlstore.New(s.table, s.group, s.tenants) }

// record is one claimed outbox row.
type record struct {
	seq       int64
	event     outbox.Event
	keyHash   int64
	attempts  int
	partition int
	// commitLSN is the end of the row's transaction in the WAL, for a row the cdc stream
	// decoded (0 for a row claimed from the table).
	commitLSN int64
}

// claim reads pending rows of the partitions in sequence order, leaving out every key held back
// by a failing (not yet due) or dead event, at most limit rows and no more than fit in maxBytes
// of payload (the first row always): sqlstore.Statements.Claim. No row locks are taken and no
// transaction is held: the lease epochs fence the acknowledgement instead (see fence).
func (s *store) claim(ctx context.Context, q querier, partitions []int, limit int, maxBytes int64) ([]record, error) {
	records, err := s.claimWith(ctx, q, s.sql().Claim(partitions, limit, maxBytes))
	if err != nil {
		return nil, fmt.Errorf("claim rows: %w", err)
	}
	return records, nil
}

// claimWith runs a claim in the statements' plan generation and notes the batch's size: a
// large batch moves the next statements to new plans (replanner).
func (s *store) claimWith(ctx context.Context, q querier, claim sqlstore.Query) ([]record, error) {
	rows, err := s.planned(claim).Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	records, err := scanRecords(rows)
	s.plans.observe(len(records), batchBytes(records))
	return records, err
}

// planned returns q, a statement on the events sent for every batch, in the plan generation of
// such statements (replanner).
func (s *store) planned(q sqlstore.Query) sqlstore.Query { return q.InGeneration(s.plans.current()) }

// claimQuery is claim's statement, in the dialect's placeholders, and its arguments.
func (s *store) claimQuery(partitions []int, limit int, maxBytes int64) (string, []any) {
	st := s.sql().Claim(partitions, limit, maxBytes)
	return st.SQL, st.Args
}

// scanRecords reads the rows of a claim (sqlstore.ClaimColumns).
func scanRecords(rows *sql.Rows) ([]record, error) {
	var out []record
	for rows.Next() {
		var (
			r       record
			eventID string
			headers []byte
		)
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&r.seq, &eventID, &r.event.Topic, &r.event.AggregateType, &r.event.AggregateID,
			&r.event.EventType, &r.event.TenantID, &r.event.Payload, &headers, &r.keyHash, created, &r.attempts, &r.partition); err != nil {
			return nil, fmt.Errorf("read row: %w", err)
		}
		id, err := uuid.Parse(eventID)
		if err != nil {
			return nil, fmt.Errorf("row %d: event id %q: %w", r.seq, eventID, err)
		}
		r.event.ID = id
		if r.event.CreatedAt, err = getCreated(); err != nil {
			return nil, fmt.Errorf("row %d: created_at: %w", r.seq, err)
		}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &r.event.Headers); err != nil {
				return nil, fmt.Errorf("row %d: headers: %w", r.seq, err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ack removes (or, with retention, marks published) the rows the broker acknowledged.
func (s *store) ack(ctx context.Context, q querier, seqs []int64, retain bool) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.planned(s.sql().Ack(seqs, retain)).Exec(ctx, q); err != nil {
		return fmt.Errorf("ack %d rows: %w", len(seqs), err)
	}
	return nil
}

// fail records a failed attempt: the row stays pending until nextAttempt, or becomes dead.
func (s *store) fail(ctx context.Context, q querier, seq int64, attempts int, nextAttempt time.Time, dead bool, reason string) error {
	reason = deadletter.TruncateUTF8(reason, maxReasonBytes)
	if _, err := s.planned(s.sql().Fail(seq, attempts, nextAttempt, dead, reason)).Exec(ctx, q); err != nil {
		return fmt.Errorf("record failure of row %d: %w", seq, err)
	}
	return nil
}

// maxReasonBytes bounds the last_error stored with a failed row.
const maxReasonBytes = 2000

// prune deletes up to limit published rows older than cutoff and reports how many it deleted.
func (s *store) prune(ctx context.Context, q querier, cutoff time.Time, limit int) (int64, error) {
	res, err := s.sql().Prune(cutoff, limit).Exec(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("prune published rows: %w", err)
	}
	return res.RowsAffected()
}

// tenantStats is one line of the pending-rows gauges.
type tenantStats struct {
	tenant        string
	pending, dead int64
	oldest        time.Time
}

func (s *store) stats(ctx context.Context, q querier) ([]tenantStats, error) {
	rows, err := s.sql().Stats().Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read outbox stats: %w", err)
	}
	defer rows.Close()
	byTenant := map[string]*tenantStats{}
	var out []tenantStats
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
			st = &tenantStats{tenant: tenant}
			byTenant[tenant] = st
		}
		if status == statusDead {
			st.dead = count
			continue
		}
		st.pending = count
		if st.oldest, err = getOldest(); err != nil {
			return nil, err
		}
	}
	for _, st := range byTenant {
		out = append(out, *st)
	}
	return out, rows.Err()
}
