package forwarder

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// Row statuses, as stored in the outbox table's status column.
const (
	statusPending   = 0
	statusPublished = 1
	statusDead      = 2
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// store holds the forwarder's SQL for one outbox table. Table names come from outbox.Table,
// already validated; every value is a bind parameter.
type store struct {
	table   outbox.Table
	dialect outbox.Dialect
	group   string
	tenants []string
	// idleTimeout bounds how long a transaction locking lease rows may stay idle (inLeaseTx).
	idleTimeout time.Duration
}

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

// in returns "(?, ?, ...)" for n values.
func in(n int) string {
	return "(?" + strings.Repeat(", ?", n-1) + ")"
}

func intArgs[T int | int64](values []T) []any {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return args
}

func (s *store) q(query string) string { return s.dialect.Rebind(query) }

// pointLookups returns, for MySQL, a table expression with one row (column n) per value, in
// ascending order, and the JSON array to bind as its one argument. STRAIGHT_JOINed to a table
// on its primary key, it makes every row a point lookup (eq_ref). Locking statements use it
// instead of "key IN (...)": once the list names a large part of the table, MariaDB scans it
// instead (type ref or ALL), and InnoDB waits for the lock of every row a locking read or a
// DELETE scans, even one the WHERE then drops, so a relay's acknowledgement could wait for (and
// deadlock with) another relay's rows.
func pointLookups[T int | int64](values []T) (table string, arg string) {
	var list strings.Builder
	list.WriteByte('[')
	for i, v := range slices.Sorted(slices.Values(values)) {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(strconv.FormatInt(int64(v), 10))
	}
	list.WriteByte(']')
	return "JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p", list.String()
}

// queryInts runs a query returning one integer column (partition numbers) and reads it all.
func queryInts(ctx context.Context, q querier, query string, args ...any) ([]int, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const claimColumns = "seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no"

// claim reads pending rows of the partitions in sequence order, leaving out every key held back
// by a failing (not yet due) or dead event: those wait, all other keys flow. It returns at most
// limit rows, and no more rows than fit in maxBytes of payload (the first row is always
// returned, however large), so a batch of large events stays small in memory: the running sum
// is computed by the database, which never sends the rows left out.
//
// The parked keys are a DISTINCT derived table, which every database materializes once. As a
// plain NOT IN subquery, MariaDB sometimes ran it as a dependent subquery, once per candidate
// row (its statistics of a table just filled say it holds one row): a 20,000-event backlog then
// took 14 s instead of 1.3 s to drain.
//
// No row locks are taken and no transaction is held: the lease epochs fence the
// acknowledgement instead (see fence). FOR UPDATE SKIP LOCKED on the event rows would be
// harmful here: a row skipped because something else briefly locked it would let a later event
// of the same key overtake it.
func (s *store) claim(ctx context.Context, q querier, partitions []int, limit int, maxBytes int64) ([]record, error) {
	query, args := s.claimQuery(partitions, limit, maxBytes)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claim rows: %w", err)
	}
	defer rows.Close()
	return scanRecords(rows)
}

// claimQuery is claim's statement, in the dialect's placeholders, and its arguments.
func (s *store) claimQuery(partitions []int, limit int, maxBytes int64) (string, []any) {
	return s.claimQueryWhere(partitions, limit, maxBytes, "", "")
}

// claimQueryWhere is claimQuery with an extra condition on the candidate rows and the arguments
// of its placeholders, claiming in the order of the expression first (then seq), or in seq order
// when first is empty (the statement the indexes were chosen for). Both are SQL written by the
// forwarder, never from input.
func (s *store) claimQueryWhere(partitions []int, limit int, maxBytes int64, first, extra string, extraArgs ...any) (string, []any) {
	parts := in(len(partitions))
	columns, passed, order := claimColumns, claimColumns, "seq"
	if first != "" {
		columns, passed, order = claimColumns+", "+first+" AS claim_order", claimColumns+", claim_order", "claim_order, seq"
	}
	inner := "SELECT " + columns + " FROM " + s.table.Events() +
		" WHERE status = 0 AND partition_no IN " + parts +
		" AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM " + s.table.Events() + " p" +
		" WHERE p.partition_no IN " + parts +
		" AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > ?))) parked)"
	args := append(intArgs(partitions), intArgs(partitions)...)
	args = append(args, s.dialect.TimeArg(time.Now()))
	if len(s.tenants) > 0 {
		inner += " AND tenant_id IN " + in(len(s.tenants))
		for _, t := range s.tenants {
			args = append(args, t)
		}
	}
	if extra != "" {
		inner += " AND " + extra
		args = append(args, extraArgs...)
	}
	inner += " ORDER BY " + order + " LIMIT ?"
	args = append(args, limit, maxBytes)
	query := "SELECT " + claimColumns + " FROM (SELECT " + passed +
		", LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY " + order + ") AS running FROM (" + inner + ") c) w" +
		" WHERE running <= ? OR running = bytes ORDER BY " + order
	return s.q(query), args
}

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
	var query string
	args := intArgs(seqs)
	if retain {
		// next_attempt_at = NULL: a retained row that once failed must not keep holding its key
		// back (the cdc source parks a key with a row that has a next attempt time).
		query = "UPDATE " + s.table.Events() + " SET status = 1, published_at = ?, next_attempt_at = NULL WHERE seq IN " + in(len(seqs))
		args = append([]any{s.dialect.TimeArg(time.Now())}, args...)
	} else if s.dialect == outbox.MySQL {
		// One point lookup per row (pointLookups): the IN list below scanned the table.
		table, list := pointLookups(seqs)
		query = "DELETE e FROM " + table + " STRAIGHT_JOIN " + s.table.Events() + " e ON e.seq = p.n"
		args = []any{list}
	} else {
		query = "DELETE FROM " + s.table.Events() + " WHERE seq IN " + in(len(seqs))
	}
	if _, err := q.ExecContext(ctx, s.q(query), args...); err != nil {
		return fmt.Errorf("ack %d rows: %w", len(seqs), err)
	}
	return nil
}

// fail records a failed attempt: the row stays pending until nextAttempt, or becomes dead.
func (s *store) fail(ctx context.Context, q querier, seq int64, attempts int, nextAttempt time.Time, dead bool, reason string) error {
	status := statusPending
	if dead {
		status = statusDead
	}
	reason = truncateUTF8(reason, maxReasonBytes)
	// Only a pending row: a row published or dead-lettered meanwhile (exactly-once recovery
	// acknowledged it) must not become pending again.
	query := "UPDATE " + s.table.Events() + " SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0"
	if _, err := q.ExecContext(ctx, s.q(query), status, attempts, s.dialect.TimeArg(nextAttempt), reason, seq); err != nil {
		return fmt.Errorf("record failure of row %d: %w", seq, err)
	}
	return nil
}

// maxReasonBytes bounds the last_error stored with a failed row.
const maxReasonBytes = 2000

// truncateUTF8 cuts s to at most n bytes on a character boundary and replaces invalid UTF-8
// (which PostgreSQL would reject, failing every acknowledgement of the batch), so the result is
// always valid UTF-8.
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// prune deletes up to limit published rows older than cutoff and reports how many it deleted.
func (s *store) prune(ctx context.Context, q querier, cutoff time.Time, limit int) (int64, error) {
	var query string
	if s.dialect == outbox.MySQL {
		query = "DELETE FROM " + s.table.Events() + " WHERE status = 1 AND published_at < ? ORDER BY published_at LIMIT ?"
	} else {
		query = "DELETE FROM " + s.table.Events() + " WHERE seq IN (SELECT seq FROM " + s.table.Events() +
			" WHERE status = 1 AND published_at < ? LIMIT ?)"
	}
	res, err := q.ExecContext(ctx, s.q(query), s.dialect.TimeArg(cutoff), limit)
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
	rows, err := q.QueryContext(ctx, "SELECT tenant_id, status, COUNT(*), MIN(created_at) FROM "+s.table.Events()+
		" WHERE status IN (0, 2) GROUP BY tenant_id, status")
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
