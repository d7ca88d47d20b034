package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
)

// Row statuses, as stored in the outbox table's status column.
const (
	StatusPending   = 0
	StatusPublished = 1
	StatusDead      = 2
	// StatusSkipped marks an event an operator skipped: kept, holding back nothing, never claimed.
	StatusSkipped = 3
	// StatusScheduled marks an event with a delivery time the relay has not released yet:
	// never claimed, holding back nothing (Statements.ReleaseDue).
	StatusScheduled = 4
)

// Querier is what *sql.DB and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Query is one statement, in the database's placeholders, and the arguments of its placeholders.
type Query struct {
	SQL  string
	Args []any
}

// InGeneration returns the statement of plan generation label ("": s itself): its text begins
// with a comment naming the generation, so a driver that prepares each text once per connection
// (pgx) prepares it anew, and PostgreSQL plans it on the tables as they are now instead of
// keeping the generic plan it made on them before. The label is SQL written by the forwarder,
// never from input.
func (s Query) InGeneration(label string) Query {
	if label == "" {
		return s
	}
	s.SQL = "/* plans " + label + " */ " + s.SQL
	return s
}

// Exec runs the statement on q.
func (s Query) Exec(ctx context.Context, q Querier) (sql.Result, error) {
	return q.ExecContext(ctx, s.SQL, s.Args...)
}

// Query runs the statement on q and returns its rows.
func (s Query) Query(ctx context.Context, q Querier) (*sql.Rows, error) {
	return q.QueryContext(ctx, s.SQL, s.Args...)
}

// QueryRow runs the statement on q and returns its one row.
func (s Query) QueryRow(ctx context.Context, q Querier) *sql.Row {
	return q.QueryRowContext(ctx, s.SQL, s.Args...)
}

// Ints runs a statement returning one integer column (partition numbers) and reads it all.
func (s Query) Ints(ctx context.Context, q Querier) ([]int, error) {
	rows, err := s.Query(ctx, q)
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

func stringArgs(values []string) []any {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return args
}

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
