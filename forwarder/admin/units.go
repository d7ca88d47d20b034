package admin

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/outbox"
)

// CheckpointReader reads the last checkpoint committed by a transactional unit without opening
// the unit (and so without fencing its owner). brokers/kafka.Publisher implements it.
type CheckpointReader interface {
	LastCheckpoint(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
}

// UnitsQuery names the transactional units of an exactly-once lease group; empty fields take
// the defaults of forwarder.Config.
type UnitsQuery struct {
	LeaseGroup            string
	TransactionalIDPrefix string
	CheckpointTopic       string
	Units                 int
}

// UnitStatus is one transactional unit: who leases it and its last committed checkpoint.
type UnitStatus struct {
	Unit string
	// Owner is the relay leasing all of the unit's partitions, "" when none does, or
	// "(split)" when its partitions have several owners (a heartbeat resolves that).
	Owner string
	// Checkpoint is nil when the unit never committed a transaction, or when its last
	// checkpoint is not readable (CheckpointError then says why).
	Checkpoint *CheckpointInfo
	// CheckpointError is set when the unit's last checkpoint could not be decoded: a relay
	// opening the unit refuses it the same way, and the unit's events wait.
	CheckpointError string
}

// CheckpointInfo summarizes a checkpoint.
type CheckpointInfo struct {
	Relay     string
	Txn       int64
	Time      time.Time
	Published int
	Dead      int
	// Installation is the identity of the outbox the checkpoint belongs to ("" for a checkpoint
	// of format 1, which names none).
	Installation string
	// Foreign is set when another installation wrote the checkpoint: the relays refuse it, and
	// the unit's events wait until the installations use different transactional-id prefixes.
	Foreign bool
}

// Units reports every transactional unit of the query's lease group: its owner, from the lease
// table, and its last checkpoint, read through r.
func (a *Admin) Units(ctx context.Context, r CheckpointReader, q UnitsQuery) ([]UnitStatus, error) {
	if q.LeaseGroup == "" {
		q.LeaseGroup = bookkeeping.DefaultLeaseGroup(nil)
	}
	installation, err := outbox.ReadInstallation(ctx, a.db, a.table)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if q.TransactionalIDPrefix == "" {
		q.TransactionalIDPrefix = bookkeeping.DefaultTransactionalIDPrefix(installation, a.table.Events(), q.LeaseGroup)
	}
	if q.CheckpointTopic == "" {
		q.CheckpointTopic = bookkeeping.DefaultCheckpointTopic
	}
	if q.Units == 0 {
		count, err := bookkeeping.UnitCount(ctx, a.db, a.sql(), a.table, q.TransactionalIDPrefix)
		if err == nil && count == 0 {
			count, err = bookkeeping.RecordedUnits(ctx, a.db, a.sql(), a.table, q.TransactionalIDPrefix) // a group of an earlier version
		}
		if err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
		q.Units = cmp.Or(count, bookkeeping.DefaultUnits(0))
	}
	if q.Units < 0 || outbox.Partitions%q.Units != 0 {
		return nil, fmt.Errorf("admin: units %d do not divide the %d partitions", q.Units, outbox.Partitions)
	}
	owners, err := a.unitOwners(ctx, q.LeaseGroup, q.Units)
	if err != nil {
		return nil, err
	}
	out := make([]UnitStatus, q.Units)
	for u := range q.Units {
		name := bookkeeping.UnitName(q.TransactionalIDPrefix, u)
		st := UnitStatus{Unit: name}
		switch set := owners[u]; {
		case len(set) > 1:
			st.Owner = "(split)"
		default:
			for o := range set {
				st.Owner = o
			}
		}
		data, err := r.LastCheckpoint(ctx, name, q.CheckpointTopic, u)
		if err != nil {
			return nil, fmt.Errorf("admin: last checkpoint of unit %s: %w", name, err)
		}
		if data != nil {
			cp, err := bookkeeping.DecodeCheckpoint(name, data)
			if err != nil {
				st.CheckpointError = err.Error()
				out[u] = st
				continue
			}
			st.Checkpoint = &CheckpointInfo{Relay: cp.Relay, Txn: cp.Txn, Time: cp.Time, Published: len(cp.Rows), Dead: len(cp.Dead),
				Installation: cp.Installation, Foreign: cp.Installation != "" && cp.Installation != installation}
		}
		out[u] = st
	}
	return out, nil
}

// unitOwners reads the lease group's owners per transactional unit (a partition's unit is its
// number modulo units); "" stands for a partition no relay leases.
func (a *Admin) unitOwners(ctx context.Context, group string, units int) (map[int]map[string]bool, error) {
	rows, err := a.sql().LeaseOwners(group).Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: read leases: %w", err)
	}
	owners := map[int]map[string]bool{}
	for rows.Next() {
		var p int
		var owner string
		if err := rows.Scan(&p, &owner); err != nil {
			rows.Close()
			return nil, fmt.Errorf("admin: read leases: %w", err)
		}
		if owners[p%units] == nil {
			owners[p%units] = map[string]bool{}
		}
		owners[p%units][owner] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("admin: read leases: %w", err)
	}
	return owners, nil
}
