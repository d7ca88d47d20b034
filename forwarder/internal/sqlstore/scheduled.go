package sqlstore

import (
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The statements of scheduled events (docs/scheduled.md): rows with a delivery time and status
// StatusScheduled, left out of every claim until the relay releases them.

// ReleaseDue releases up to limit due scheduled rows of the partitions (and of the Statements'
// tenants, when set), earliest due first (then seq): status StatusScheduled becomes StatusPending once deliver_at has passed by the
// database's clock, and the next claim takes them in its sequence order. It locks the rows it
// releases, skipping those another transaction holds (a Writer.Cancel or Reschedule not yet
// ended: they wait for the next claim, and a cancelled one is gone by then), so a cancel and a
// release of one row never both succeed. On PostgreSQL and SQLite it is the whole release, one
// statement; on MySQL, which cannot update a table it selects from in a subquery, it selects the
// seqs to release (locking them), and ReleaseSeqs, in the same transaction, releases them.
func (s Statements) ReleaseDue(partitions []int, limit int) Query {
	now, nowArg := s.d.Now(0)
	args := append([]any{nowArg}, intArgs(partitions)...)
	// The time in a subquery: evaluated once, so the index range can use it (PostgreSQL does
	// not put a volatile expression such as clock_timestamp() in an index condition, and would
	// read every scheduled row instead).
	due := "SELECT seq FROM " + s.table.Events() + " WHERE status = 4 AND deliver_at <= (SELECT " + now + ")" +
		" AND partition_no IN " + in(len(partitions))
	due, args = s.tenantFilter(due, args)
	args = append(args, limit)
	due += " ORDER BY deliver_at, seq LIMIT ?" + s.d.LockSuffix(true)
	switch {
	case s.d.Name() == outbox.MySQL:
		return s.q(due, args...)
	case s.d.Name() == outbox.Postgres:
		// The seqs as an array, computed once: the update then finds each row by the primary
		// key, whatever the table's size and statistics (with IN (subquery), fresh statistics
		// plan a hash join over a scan of the whole table).
		return s.q("UPDATE "+s.table.Events()+" SET status = 0 WHERE seq = ANY(ARRAY("+due+"))", args...)
	}
	return s.q("UPDATE "+s.table.Events()+" SET status = 0 WHERE seq IN ("+due+")", args...)
}

// ReleasePlan (PostgreSQL) is the setting that the release's transaction sets first, so that
// it reads the due rows in the scheduled index's order and stops after limit of them. Without
// it, statistics that do not count a burst of scheduled rows just made due (a table's statistics
// lag its writes) plan a bitmap scan of every due row and a sort, at every release: a burst of
// n due rows then costs n²/limit row reads.
func (s Statements) ReleasePlan() string {
	if s.d.Name() != outbox.Postgres {
		return ""
	}
	return "SET LOCAL enable_sort = off"
}

// ReleaseSeqs (MySQL) releases the scheduled rows seqs that ReleaseDue selected and locked.
func (s Statements) ReleaseSeqs(seqs []int64) Query {
	table, list := pointLookups(seqs)
	return Query{SQL: "UPDATE " + table + " STRAIGHT_JOIN " + s.table.Events() + " e ON e.seq = p.n SET e.status = 0 WHERE e.status = 4",
		Args: []any{list}}
}

// NextDue selects the earliest delivery time of the scheduled rows of the partitions due within
// the next horizon (NULL when there is none) and the database's current time, so that an idle
// worker sleeps no longer than until then. It reads the index of scheduled rows in deliver_at
// order from the start, and no further than the horizon, however many are scheduled for later.
func (s Statements) NextDue(partitions []int, horizon time.Duration) Query {
	now, nowArg := s.d.Now(0)
	until, untilArg := s.d.Now(horizon)
	args := append([]any{untilArg}, intArgs(partitions)...)
	next, args := s.tenantFilter("SELECT deliver_at FROM "+s.table.Events()+" WHERE status = 4 AND deliver_at <= (SELECT "+until+")"+
		" AND partition_no IN "+in(len(partitions)), args)
	return s.q("SELECT ("+next+" ORDER BY deliver_at LIMIT 1), "+now, append(args, nowArg)...)
}

// tenantFilter adds the Statements' tenants (when set) to a scheduled-rows condition, as the
// claim has them: a relay of some tenants releases and waits for their scheduled events only,
// and leaves the others' to their own relays.
func (s Statements) tenantFilter(query string, args []any) (string, []any) {
	if len(s.tenants) == 0 {
		return query, args
	}
	return query + " AND tenant_id IN " + in(len(s.tenants)), append(args, stringArgs(s.tenants)...)
}
