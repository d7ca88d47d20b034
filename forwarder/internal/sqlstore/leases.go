package sqlstore

import (
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The statements of the lease protocol: the group's lease rows (partition, owner, expiry,
// epoch) and its relays' heartbeats. Expiry and liveness are computed by the database
// (Dialect.Now).

// EnsureLeaseRows creates the group's lease rows if they do not exist yet.
func (s Statements) EnsureLeaseRows() Query {
	args := make([]any, 0, 2*outbox.Partitions)
	for p := range outbox.Partitions {
		args = append(args, s.group, p)
	}
	values := "(?, ?)"
	for range outbox.Partitions - 1 {
		values += ", (?, ?)"
	}
	return s.q(s.d.InsertIgnore(s.table.Leases(), "lease_group, partition_no", values), args...)
}

// LiveLeases selects partition_no, epoch of the unexpired leases owner holds among the
// partitions p with p % workers == worker, without locking anything.
func (s Statements) LiveLeases(owner string, worker, workers int) Query {
	now, nowArg := s.d.Now(0)
	return s.q("SELECT partition_no, epoch FROM "+s.table.Leases()+
		" WHERE lease_group = ? AND owner = ? AND partition_no % ? = ? AND expires_at > "+now+" ORDER BY partition_no",
		s.group, owner, workers, worker, nowArg)
}

// LockLeases selects partition_no, owner, epoch of the lease rows of the partitions (not
// empty), locking them by primary key in ascending partition order until the transaction ends;
// with skipLocked, rows locked by another transaction are left out instead of waited for.
func (s Statements) LockLeases(partitions []int, skipLocked bool) Query {
	return s.d.LockLeases(s.table, s.group, partitions, skipLocked)
}

// OwnedPartitions selects the partitions owner holds (expired or not), in ascending order.
func (s Statements) OwnedPartitions(owner string) Query {
	return s.q("SELECT partition_no FROM "+s.table.Leases()+" WHERE lease_group = ? AND owner = ? ORDER BY partition_no", s.group, owner)
}

// Unregister deletes owner's heartbeat.
func (s Statements) Unregister(owner string) Query {
	return s.q("DELETE FROM "+s.table.Relays()+" WHERE lease_group = ? AND owner = ?", s.group, owner)
}

// RegisterRelay records owner's heartbeat (Dialect.RegisterRelay).
func (s Statements) RegisterRelay(owner string, ttl time.Duration) (q Query, exclusive bool) {
	return s.d.RegisterRelay(s.table, s.group, owner, ttl)
}

// OtherRelay selects the name of a relay other than owner whose heartbeat is younger than ttl.
func (s Statements) OtherRelay(owner string, ttl time.Duration) Query {
	alive, aliveArg := s.d.Now(-ttl)
	return s.q("SELECT owner FROM "+s.table.Relays()+" WHERE owner <> ? AND heartbeat_at > "+alive+" ORDER BY owner LIMIT 1", owner, aliveArg)
}

// ForgetDeadRelays deletes the group's heartbeats older than ttl.
func (s Statements) ForgetDeadRelays(ttl time.Duration) Query {
	dead, deadArg := s.d.Now(-ttl)
	return s.q("DELETE FROM "+s.table.Relays()+" WHERE lease_group = ? AND heartbeat_at < "+dead, s.group, deadArg)
}

// CountRelays counts the group's registered relays.
func (s Statements) CountRelays() Query {
	return s.q("SELECT COUNT(*) FROM "+s.table.Relays()+" WHERE lease_group = ?", s.group)
}

// Renew extends owner's leases of the partitions (not empty) by ttl from the database's now.
func (s Statements) Renew(owner string, ttl time.Duration, partitions []int) Query {
	expires, expiresArg := s.d.Now(ttl)
	return s.q("UPDATE "+s.table.Leases()+" SET expires_at = "+expires+
		" WHERE lease_group = ? AND owner = ? AND partition_no IN "+in(len(partitions)),
		append([]any{expiresArg, s.group, owner}, intArgs(partitions)...)...)
}

// Release gives up owner's leases of the partitions (not empty).
func (s Statements) Release(owner string, partitions []int) Query {
	return s.q("UPDATE "+s.table.Leases()+" SET owner = NULL, expires_at = ?"+
		" WHERE lease_group = ? AND owner = ? AND partition_no IN "+in(len(partitions)),
		append([]any{s.d.TimeArg(time.Unix(0, 0)), s.group, owner}, intArgs(partitions)...)...)
}

// FreeLeases selects up to limit free or expired partitions, in ascending order.
func (s Statements) FreeLeases(limit int) Query {
	now, nowArg := s.d.Now(0)
	return s.q("SELECT partition_no FROM "+s.table.Leases()+
		" WHERE lease_group = ? AND (owner IS NULL OR expires_at < "+now+") ORDER BY partition_no LIMIT ?", s.group, nowArg, limit)
}

// Acquire takes those of the partitions (not empty) that are still free or expired for owner
// until ttl from the database's now, incrementing their epochs, which fences the previous owner.
func (s Statements) Acquire(owner string, ttl time.Duration, partitions []int) Query {
	now, nowArg := s.d.Now(0)
	expires, expiresArg := s.d.Now(ttl)
	return s.q("UPDATE "+s.table.Leases()+" SET owner = ?, epoch = epoch + 1, expires_at = "+expires+
		" WHERE lease_group = ? AND (owner IS NULL OR expires_at < "+now+") AND partition_no IN "+in(len(partitions)),
		append([]any{owner, expiresArg, s.group, nowArg}, intArgs(partitions)...)...)
}
