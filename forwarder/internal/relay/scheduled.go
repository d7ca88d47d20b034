package relay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// ReleaseDue releases up to limit due scheduled events of the partitions
// (sqlstore.Statements.ReleaseDue), in a short transaction of its own, so the next claim can
// take them. It needs no lease fence: a released row is an ordinary pending row, which only the
// partition's owner claims and acknowledges.
func (s *Store) ReleaseDue(ctx context.Context, db *sql.DB, partitions []int, limit int) error {
	if len(partitions) == 0 || limit <= 0 {
		return nil
	}
	var err error
	switch plan := s.SQL().ReleasePlan(); {
	case s.Dialect == outbox.MySQL:
		// Two statements: they need a transaction. Elsewhere the release is one statement.
		err = s.ReleaseTx(ctx, db, func(tx *sql.Tx) error { _, err := s.ReleaseDueIn(ctx, tx, partitions, limit); return err })
	case plan != "":
		_, err = s.releaseWithPlan(ctx, db, plan, partitions, limit)
	default:
		_, err = s.ReleaseDueIn(ctx, db, partitions, limit)
	}
	return err
}

// releaseWithPlan runs the release in a transaction that sets plan first (PostgreSQL:
// sqlstore.Statements.ReleasePlan).
func (s *Store) releaseWithPlan(ctx context.Context, db *sql.DB, plan string, partitions []int, limit int) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("release due scheduled events: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing to undo
	if _, err := tx.ExecContext(ctx, plan); err != nil {
		return 0, fmt.Errorf("release due scheduled events: %s: %w", plan, err)
	}
	n, err := s.ReleaseDueIn(ctx, tx, partitions, limit)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("release due scheduled events: commit: %w", err)
	}
	return n, nil
}

// ReleaseTx runs fn in the transaction of a MySQL release: the lease transaction's READ
// COMMITTED (sqlstore.MySQL.LeaseTx). Under REPEATABLE READ the release's locking read took
// gap locks on the scheduled index, so a writer inserting an event due in that range waited for
// the release, and the release's update of those rows could deadlock with the other workers'
// releases and claims (Error 1213).
func (s *Store) ReleaseTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return s.InLeaseTx(ctx, db, fn)
}

// ReleaseDueIn is ReleaseDue through q (on MySQL, a transaction) and returns the number of rows
// released.
func (s *Store) ReleaseDueIn(ctx context.Context, q Querier, partitions []int, limit int) (int64, error) {
	st := s.SQL()
	release := s.Planned(st.ReleaseDue(partitions, limit))
	if s.Dialect != outbox.MySQL {
		res, err := release.Exec(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("release due scheduled events: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("release due scheduled events: %w", err)
		}
		return n, nil
	}
	seqs, err := release.Ints(ctx, q)
	if err != nil || len(seqs) == 0 {
		if err != nil {
			err = fmt.Errorf("select due scheduled events: %w", err)
		}
		return 0, err
	}
	due := make([]int64, len(seqs))
	for i, seq := range seqs {
		due[i] = int64(seq)
	}
	if _, err := st.ReleaseSeqs(due).Exec(ctx, q); err != nil {
		return 0, fmt.Errorf("release %d due scheduled events: %w", len(due), err)
	}
	return int64(len(due)), nil
}

// NextDue returns how long, by the database's clock, until the earliest scheduled event of the
// partitions is due (zero or less: due now), and false when none comes due within horizon.
func (s *Store) NextDue(ctx context.Context, q Querier, partitions []int, horizon time.Duration) (time.Duration, bool, error) {
	if len(partitions) == 0 {
		return 0, false, nil
	}
	due, getDue := outbox.TimeScanner()
	now, getNow := outbox.TimeScanner()
	if err := s.Planned(s.SQL().NextDue(partitions, horizon)).QueryRow(ctx, q).Scan(due, now); err != nil {
		return 0, false, fmt.Errorf("read the next due scheduled event: %w", err)
	}
	at, err := getDue()
	if err != nil || at.IsZero() {
		return 0, false, err
	}
	current, err := getNow()
	if err != nil {
		return 0, false, err
	}
	return at.Sub(current), true, nil
}
