package sqlstore

// The operator's statements (forwarder/admin.Admin): the backlog, and the dead letters to list,
// replay or discard.

// DeadLetters selects up to limit dead rows, oldest first: seq, event_id, topic,
// aggregate_type, aggregate_id, event_type, tenant_id, attempts, last_error, created_at (of the
// Statements' tenants, when set, as Replay, MarkKeysOfDead and Discard).
func (s Statements) DeadLetters(limit int) Query {
	scope, args := s.tenantScope()
	return s.q("SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at FROM "+
		s.table.Events()+" WHERE status = 2"+scope+" ORDER BY seq LIMIT ?", append(args, limit)...)
}

// Replay makes the dead rows of the event ids (not empty) pending again with fresh attempts and
// a next attempt time (now): the cdc source leaves the keys of pending rows with one to its
// retry path.
func (s Statements) Replay(eventIDs []string) Query {
	scope, args := s.tenantScope()
	return s.q("UPDATE "+s.table.Events()+" SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status = 2 AND event_id IN "+
		in(len(eventIDs))+scope, append(append([]any{s.nowArg()}, stringArgs(eventIDs)...), args...)...)
}

// MarkKeysOfDead gives the unmarked pending rows of the keys of the dead rows of the event ids
// (not empty) a next attempt time (now), before Discard: the cdc source then leaves them to its
// retry path, in order, rather than letting newer events of the key overtake them.
func (s Statements) MarkKeysOfDead(eventIDs []string) Query {
	events := s.table.Events()
	scope, args := s.tenantScope()
	return s.q("UPDATE "+s.releasedRows()+" WHERE status = 0 AND next_attempt_at IS NULL"+
		" AND key_hash IN (SELECT key_hash FROM (SELECT key_hash FROM "+events+" WHERE status = 2 AND event_id IN "+in(len(eventIDs))+scope+") d)",
		append(append([]any{s.nowArg()}, stringArgs(eventIDs)...), args...)...)
}

// Discard deletes the dead rows of the event ids (not empty).
func (s Statements) Discard(eventIDs []string) Query {
	scope, args := s.tenantScope()
	return s.q("DELETE FROM "+s.table.Events()+" WHERE status = 2 AND event_id IN "+in(len(eventIDs))+scope, append(stringArgs(eventIDs), args...)...)
}

// Status selects, per topic: pending, retrying (pending that failed at least once), dead and
// skipped rows, and the earliest time a pending row became due (dueSince), of the Statements'
// tenants, when set.
func (s Statements) Status() Query {
	scope, args := s.tenantScope()
	due, nowArg := s.dueSince("")
	return s.q("SELECT topic, "+
		"SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), "+
		"SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), "+
		"MIN(CASE WHEN status = 0 THEN "+due+" END) FROM "+
		s.table.Events()+" WHERE status IN (0, 2, 3)"+scope+" GROUP BY topic ORDER BY topic", append([]any{nowArg}, args...)...)
}

// LeaseOwners selects partition_no and owner ("" for none) of every lease row of the group.
func (s Statements) LeaseOwners(group string) Query {
	return s.q("SELECT partition_no, COALESCE(owner, '') FROM "+s.table.Leases()+" WHERE lease_group = ?", group)
}

// BlockedSummary selects, per status of the head of each blocked key (the first row of a key
// whose rows include a dead one or a pending one that failed at least once): the status, the
// number of keys and the earliest time one of the heads became due (dueSince: the table
// records no time of the first failure, which came after it). The whole table, every tenant.
func (s Statements) BlockedSummary() Query {
	events := s.table.Events()
	due, nowArg := s.dueSince("h.")
	return s.q("SELECT h.status, COUNT(*), MIN("+due+") FROM "+events+" h JOIN (SELECT key_hash, MIN(seq) AS head FROM "+
		events+" WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head GROUP BY h.status", nowArg)
}
