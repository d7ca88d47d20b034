package sqlstore

import (
	"strconv"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The statements of the cdc source, which runs on PostgreSQL only (its configuration refuses
// other dialects): they use PostgreSQL's arrays and data-modifying WITH. A pending row with a
// next attempt time marks its key as left to the retry path: a failed event, a replayed dead
// letter, or a later event of such a key that the stream passed on. The <table>_retry_keys
// index (migration 3) finds them.

// Replicator is the capability of a database adapter whose database streams its changes
// (logical replication), which the cdc source and the operator's slot queries need.
type Replicator interface {
	Dialect
	// LogicalReplication marks the capability.
	LogicalReplication()
}

// LogicalReplication: PostgreSQL streams its changes through replication slots.
func (Postgres) LogicalReplication() {}

// Replicates reports whether a database of the dialect streams its changes (Replicator).
func Replicates(d outbox.Dialect) bool {
	a, err := For(d)
	if err != nil {
		return false
	}
	_, ok := a.(Replicator)
	return ok
}

// Replicates reports whether the table's database streams its changes (Replicator).
func (s Statements) Replicates() bool {
	_, ok := s.d.(Replicator)
	return ok
}

// CDC is the cdc source's statements for the table, lease group and tenants of Statements.
type CDC struct{ s Statements }

// CDC returns the cdc source's statements (PostgreSQL).
func (s Statements) CDC() CDC { return CDC{s} }

// RetryOrder is the retry path's claim order, before seq: commit order per key (ClaimRetry).
const RetryOrder = "COALESCE(commit_lsn, 0)"

// Admit selects, for each of the rows seqs that exists, seq and whether it is pending and
// unmarked and its key neither marked nor dead (the stream may publish it); parts and keys are
// the partitions and key hashes of the rows.
func (c CDC) Admit(seqs, parts, keys []int64) Query {
	events := c.s.table.Events()
	return Query{SQL: "SELECT seq, status = 0 AND next_attempt_at IS NULL AND key_hash NOT IN (SELECT p.key_hash FROM " +
		events + " p WHERE p.partition_no = ANY(" + unplanned(2, "smallint[]") + ") AND p.key_hash = ANY(" + unplanned(3, "bigint[]") + ")" +
		" AND (p.status = 2 OR p.next_attempt_at IS NOT NULL)) FROM " + events + " WHERE seq = ANY(" + unplanned(1, "bigint[]") + ")",
		Args: []any{seqs, parts, keys}}
}

// unplanned is parameter $n of type typ as a value the planner does not look into (a scalar
// subquery, run once per execution). The statements a relay sends for every batch bind the
// batch's seqs, partitions and keys as arrays. A plan made for arrays the planner can see costs
// less than the generic plan, so PostgreSQL would plan every execution again, and planning takes
// longer than running such a statement; with the arrays out of sight every plan costs the same,
// and PostgreSQL keeps the generic plan from the sixth execution on a connection. Only for arrays
// whose size changes nothing in the plan's shape: an index lookup per element, or a filter.
//
// A generic plan lasts until the table's statistics change: made while the table is a few pages,
// it scans the table, and would keep scanning a backlog that builds up later until (auto)analyze
// replaces the statistics; the forwarder moves such statements to a new plan generation when its
// batches show a backlog (Query.InGeneration).
func unplanned(n int, typ string) string {
	// The outer cast makes the subquery an expression: ANY((SELECT ...)) would compare with
	// each row of the subquery instead of each element of the array.
	return "(SELECT $" + strconv.Itoa(n) + "::" + typ + ")::" + typ
}

// TransactionsRunning selects whether any of the transactions xids still holds its
// transaction id lock (released only once its rows are visible to other sessions).
func (c CDC) TransactionsRunning(xids []string) Query {
	return Query{SQL: "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid'" +
		" AND transactionid::text = ANY($1))", Args: []any{xids}}
}

// ownedLeases is the WITH clause that locks the lease rows of the partitions ($3) owner ($2)
// still holds with the epochs ($4, in the order of $3) read, in partition order, before any event
// row. Each lease row is checked against its epoch by position rather than joined with the
// arrays: a join's plan depends on the estimates of the lease table. The partitions are distinct,
// as a relay's leases are (one row per partition).
func (c CDC) ownedLeases() string {
	parts := unplanned(3, "int[]")
	return "WITH owned AS (SELECT l.partition_no FROM " + c.s.table.Leases() + " l" +
		" WHERE l.lease_group = $1 AND l.owner = $2 AND l.partition_no = ANY(" + parts + ")" +
		" AND l.epoch = (" + unplanned(4, "bigint[]") + ")[array_position(" + parts + ", l.partition_no)]" +
		" ORDER BY l.partition_no FOR UPDATE OF l),"
}

// ownedFilter is the condition that keeps the event rows of the partitions found owned. It reads
// them as an array, filtering the rows looked up by seq: as IN (SELECT ... FROM owned) the
// planner, which expected one owned partition, could look the batch's rows up once per owned
// partition.
const ownedFilter = "partition_no = ANY(ARRAY(SELECT partition_no FROM owned))"

// MarkRetry gives the still pending, unmarked rows seqs of the partitions owner still holds
// with the epochs read a next attempt time (now) and their commit positions lsns (0: none). It
// selects the partitions found owned, each with the number of rows marked.
func (c CDC) MarkRetry(owner string, parts []int32, epochs []int64, seqs, lsns []int64) Query {
	return Query{SQL: c.ownedLeases() +
		" marked AS (UPDATE " + c.s.table.Events() + " e SET next_attempt_at = clock_timestamp(), commit_lsn = NULLIF(m.lsn, 0)" +
		" FROM unnest(" + unplanned(5, "bigint[]") + ", " + unplanned(6, "bigint[]") + ") AS m(seq, lsn) WHERE e.seq = m.seq AND e.status = 0 AND e.next_attempt_at IS NULL" +
		" AND e." + ownedFilter + " RETURNING 1)" +
		" SELECT partition_no, (SELECT COUNT(*) FROM marked) FROM owned", Args: []any{c.s.group, owner, parts, epochs, seqs, lsns}}
}

// AckFenced deletes (or, with retain, marks published) the rows seqs of the partitions owner
// still holds with the epochs read, and selects the partitions found owned: acknowledge's
// transaction as one statement.
func (c CDC) AckFenced(owner string, parts []int32, epochs []int64, seqs []int64, retain bool) Query {
	args := []any{c.s.group, owner, parts, epochs, seqs}
	act := "DELETE FROM " + c.s.table.Events()
	if retain {
		act = "UPDATE " + c.s.table.Events() + " SET status = 1, published_at = $6, next_attempt_at = NULL" // as in Ack
		args = append(args, c.s.nowArg())
	}
	return Query{SQL: c.ownedLeases() +
		" acked AS (" + act + " WHERE seq = ANY(" + unplanned(5, "bigint[]") + ") AND " + ownedFilter + " RETURNING 1)" +
		" SELECT partition_no FROM owned", Args: args}
}

// MarkParkedUpTo marks the unmarked pending rows up to seq horizon of keys that are marked or
// dead: the later events of parked keys, which the polling source kept behind their key's
// failure without marking them.
func (c CDC) MarkParkedUpTo(horizon int64) Query {
	events := c.s.table.Events()
	return Query{SQL: "UPDATE " + events + " SET next_attempt_at = clock_timestamp()" +
		" WHERE status = 0 AND next_attempt_at IS NULL AND seq <= $1 AND key_hash IN (SELECT p.key_hash FROM " +
		events + " p WHERE p.status = 2 OR p.next_attempt_at IS NOT NULL)", Args: []any{horizon}}
}

// MaxSeq selects the highest seq in the table (0 when empty).
func (c CDC) MaxSeq() Query {
	return Query{SQL: "SELECT COALESCE(MAX(seq), 0) FROM " + c.s.table.Events()}
}

// ClaimRetry claims the marked rows that are due, in the order of their commit positions (the
// rows marked without one first), then seq: commit order per key (Claim's rules otherwise).
func (c CDC) ClaimRetry(partitions []int, limit int, maxBytes int64) Query {
	return c.s.ClaimWhere(partitions, limit, maxBytes, RetryOrder, "next_attempt_at IS NOT NULL")
}

// ClaimUpTo claims pending rows up to seq horizon (the drain of a fresh slot).
func (c CDC) ClaimUpTo(partitions []int, limit int, maxBytes int64, horizon int64) Query {
	return c.s.ClaimWhere(partitions, limit, maxBytes, "", "seq <= ?", horizon)
}

// OtherLiveOwners counts the unexpired leases of the group held by relays other than owner.
func (c CDC) OtherLiveOwners(owner string) Query {
	return Query{SQL: "SELECT COUNT(*) FROM " + c.s.table.Leases() +
		" WHERE lease_group = $1 AND owner IS NOT NULL AND owner <> $2 AND expires_at > clock_timestamp()", Args: []any{c.s.group, owner}}
}

// SlotDrained selects whether the rows committed before the slot existed have been drained
// (false also when the slot has no row).
func (c CDC) SlotDrained(slot string) Query {
	return Query{SQL: "SELECT COALESCE((SELECT drained_at IS NOT NULL FROM " + c.s.table.CDCSlots() +
		" WHERE slot_name = $1), false)", Args: []any{slot}}
}

// SetSlotDrained records (drained true) or clears (before the slot is created) the drain state.
func (c CDC) SetSlotDrained(slot string, drained bool) Query {
	if drained {
		return Query{SQL: "INSERT INTO " + c.s.table.CDCSlots() + " (slot_name, drained_at) VALUES ($1, now())" +
			" ON CONFLICT (slot_name) DO UPDATE SET drained_at = now()", Args: []any{slot}}
	}
	return Query{SQL: "INSERT INTO " + c.s.table.CDCSlots() + " (slot_name) VALUES ($1)" +
		" ON CONFLICT (slot_name) DO UPDATE SET created_at = now(), drained_at = NULL", Args: []any{slot}}
}

// SlotRecorded selects whether the slot table records the slot (made by this outbox's relays).
func (c CDC) SlotRecorded(slot string) Query {
	return Query{SQL: "SELECT EXISTS (SELECT 1 FROM " + c.s.table.CDCSlots() + " WHERE slot_name = $1)", Args: []any{slot}}
}

// ForgetSlot deletes the slot table's row of the slot.
func (c CDC) ForgetSlot(slot string) Query {
	return Query{SQL: "DELETE FROM " + c.s.table.CDCSlots() + " WHERE slot_name = $1", Args: []any{slot}}
}

// StrandedRows counts the pending rows of the tenants that are not on the retry path and older
// than age, and selects the age in seconds of the oldest (by the database's clock). A released
// scheduled row is aged from its delivery time (the later of created_at and deliver_at;
// GREATEST ignores a NULL deliver_at): until then it was not the stream's to deliver.
func (c CDC) StrandedRows(age time.Duration) Query {
	query := "SELECT COUNT(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - MIN(GREATEST(created_at, deliver_at))), 0)::float8 FROM " +
		c.s.table.Events() + " WHERE status = 0 AND next_attempt_at IS NULL AND created_at < clock_timestamp() - make_interval(secs => $1)" +
		" AND (deliver_at IS NULL OR deliver_at < clock_timestamp() - make_interval(secs => $1))"
	args := []any{age.Seconds()}
	if len(c.s.tenants) > 0 {
		query += " AND tenant_id = ANY($2)"
		args = append(args, c.s.tenants)
	}
	return Query{SQL: query, Args: args}
}

// Slots selects slot_name, active, active_pid, wal_status and the WAL bytes it pins of the
// table's replication slots: those its slot table records and those named in asked.
func (c CDC) Slots(asked []string) Query {
	return Query{SQL: "SELECT slot_name, active, COALESCE(active_pid, 0), COALESCE(wal_status, '')," +
		" COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint FROM pg_replication_slots" +
		" WHERE slot_name = ANY($1) OR slot_name IN (SELECT slot_name FROM " + c.s.table.CDCSlots() + ") ORDER BY slot_name",
		Args: []any{asked}}
}

// OneStatementAcker is the capability of a database adapter whose database fences and
// acknowledges a batch in one statement (CDC.AckFenced: a data-modifying WITH over arrays)
// instead of a transaction of five round trips.
type OneStatementAcker interface {
	Dialect
	// AcksInOneStatement marks the capability.
	AcksInOneStatement()
}

// AcksInOneStatement: PostgreSQL runs CDC.AckFenced.
func (Postgres) AcksInOneStatement() {}

// AcksInOneStatement reports whether the table's database acknowledges in one statement
// (OneStatementAcker).
func (s Statements) AcksInOneStatement() bool {
	_, ok := s.d.(OneStatementAcker)
	return ok
}
