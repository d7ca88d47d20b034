package sqlstore

import "github.com/outboxkit/outboxkit/outbox"

// The statements of scheduled events (docs/scheduled.md): rows with a delivery time and status
// StatusScheduled, left out of every claim until the relay releases them.

// ReleaseDue releases up to limit due scheduled rows of the partitions, earliest due first (then
// seq): status StatusScheduled becomes StatusPending once deliver_at has passed by the
// database's clock, and the next claim takes them in its sequence order. It locks the rows it
// releases, skipping those another transaction holds (a Writer.Cancel or Reschedule not yet
// ended: they wait for the next claim, and a cancelled one is gone by then), so a cancel and a
// release of one row never both succeed. On PostgreSQL and SQLite it is the whole release, one
// statement; on MySQL, which cannot update a table it selects from in a subquery, it selects the
// seqs to release (locking them), and ReleaseSeqs, in the same transaction, releases them.
func (s Statements) ReleaseDue(partitions []int, limit int) Query {
	now, nowArg := s.d.Now(0)
	args := append([]any{nowArg}, intArgs(partitions)...)
	args = append(args, limit)
	// The time in a subquery: evaluated once, so the index range can use it (PostgreSQL does
	// not put a volatile expression such as clock_timestamp() in an index condition, and would
	// read every scheduled row instead).
	due := "SELECT seq FROM " + s.table.Events() + " WHERE status = 4 AND deliver_at <= (SELECT " + now + ")" +
		" AND partition_no IN " + in(len(partitions)) + " ORDER BY deliver_at, seq LIMIT ?" + s.d.LockSuffix(true)
	if s.d.Name() == outbox.MySQL {
		return s.q(due, args...)
	}
	return s.q("UPDATE "+s.table.Events()+" SET status = 0 WHERE seq IN ("+due+")", args...)
}

// ReleaseSeqs (MySQL) releases the scheduled rows seqs that ReleaseDue selected and locked.
func (s Statements) ReleaseSeqs(seqs []int64) Query {
	table, list := pointLookups(seqs)
	return Query{SQL: "UPDATE " + table + " STRAIGHT_JOIN " + s.table.Events() + " e ON e.seq = p.n SET e.status = 0 WHERE e.status = 4",
		Args: []any{list}}
}
