package sqlstore

// The operator's statements of scheduled events (docs/scheduled.md): rows of status 4, read
// through the <table>_scheduled index.

// ScheduledSummary selects the number of scheduled events of the tenants and the earliest
// deliver_at among them (NULL when none).
func (s Statements) ScheduledSummary() Query {
	scope, args := s.tenantScope()
	return s.q("SELECT COUNT(*), MIN(deliver_at) FROM "+s.table.Events()+" WHERE status = 4"+scope, args...)
}

// ScheduledEvents selects up to limit scheduled events of the tenants, next due first: seq,
// event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, created_at, deliver_at.
func (s Statements) ScheduledEvents(limit int) Query {
	scope, args := s.tenantScope()
	return s.q("SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, created_at, deliver_at FROM "+
		s.table.Events()+" WHERE status = 4"+scope+" ORDER BY deliver_at, seq LIMIT ?", append(args, limit)...)
}

// ScheduledOfOtherTenants selects, of the scheduled events eventIDs (not empty), those that are
// not of the tenants (none when no tenants are set).
func (s Statements) ScheduledOfOtherTenants(eventIDs []string) Query {
	if len(s.tenants) == 0 {
		return s.q("SELECT event_id FROM " + s.table.Events() + " WHERE 1 = 0")
	}
	return s.q("SELECT event_id FROM "+s.table.Events()+" WHERE event_id IN "+in(len(eventIDs))+
		" AND tenant_id NOT IN "+in(len(s.tenants)), append(stringArgs(eventIDs), stringArgs(s.tenants)...)...)
}
