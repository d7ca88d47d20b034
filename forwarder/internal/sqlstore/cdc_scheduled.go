package sqlstore

// The cdc source's release of due scheduled events (docs/cdc.md, "Scheduled events"). The
// publication streams inserts only, and a release that only changed the row's status would never
// reach the stream: the release writes each due row again instead, a delete and an insert of the
// row under a new seq (the same event id and columns) in the release's transaction, so the stream
// carries it at the release's commit, in commit order with the other events of its key, and the
// stream's admit and parking apply to it as to any insert. The new seq is what lets the stream's
// admit tell the released row from the scheduled one: until the release's commit is visible,
// admit does not find the new seq and waits for the transaction (cdc's admitVisible), where under
// the old seq it would have found the scheduled row and passed it by.

// ReleaseDue deletes up to limit due scheduled rows (status 4, deliver_at passed by the
// database's clock, of the tenants), earliest due first (then seq), and inserts them back under
// new seqs, in the order of their old ones, selecting the new seqs; ReleaseRows, in the same
// transaction, makes them pending. The rows are locked with FOR UPDATE SKIP LOCKED, as the polling
// source's release does: a row that a Writer.Cancel or Reschedule holds is skipped until that
// transaction ends, so a cancel and a release of one row never both succeed. Every column is
// copied (through the row as JSON, so a column added later is copied too) except seq; the rows go
// back with status 4, which the scheduled trigger's condition (status 0) skips: it would
// otherwise make them scheduled again.
func (c CDC) ReleaseDue(limit int) Query {
	events := c.s.table.Events()
	// The time in a subquery, evaluated once, so that the index range on deliver_at can use it
	// (as in Statements.ReleaseDue: PostgreSQL keeps a volatile clock_timestamp() out of index
	// conditions and would read every scheduled row).
	due := "SELECT seq FROM " + events + " WHERE status = 4 AND deliver_at <= (SELECT clock_timestamp())"
	args := []any{limit}
	if len(c.s.tenants) > 0 {
		due += " AND tenant_id = ANY($2)"
		args = append(args, c.s.tenants)
	}
	due += " ORDER BY deliver_at, seq LIMIT $1 FOR UPDATE SKIP LOCKED"
	return Query{SQL: "WITH due AS (" + due + "), gone AS (DELETE FROM " + events + " WHERE seq IN (SELECT seq FROM due) RETURNING *)" +
		" INSERT INTO " + events + " SELECT r.* FROM (SELECT * FROM gone ORDER BY seq) g," +
		" LATERAL jsonb_populate_record(NULL::" + events + ", to_jsonb(g) || jsonb_build_object('seq', nextval(pg_get_serial_sequence('" +
		events + "', 'seq')))) r RETURNING seq", Args: args}
}

// ReleaseRows makes the rows seqs, written again by ReleaseDue in the same transaction,
// pending.
func (c CDC) ReleaseRows(seqs []int64) Query {
	return Query{SQL: "UPDATE " + c.s.table.Events() + " SET status = 0 WHERE seq = ANY($1) AND status = 4", Args: []any{seqs}}
}
