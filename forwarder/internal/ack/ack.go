// Package ack is the forwarder's one acknowledger: the end of every batch, where the rows the
// broker acknowledged are deleted (or marked published) and the failures settled, fenced by the
// leases' epochs so that a relay that lost a partition can neither delete, mark nor park its
// rows. Its strategy for a batch the broker took whole is chosen once, from the store's
// capability: one statement (sqlstore's OneStatementAcker: PostgreSQL) or the fenced
// transaction. Exactly-once delivery adds the checkpoint marks of its units through
// AcknowledgeMarked, a capability the at-least-once path does not use.
package ack

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// Acknowledger acknowledges deliveries.
type Acknowledger struct {
	core relay.Core
	// oneStatement says which strategy whole is (OneStatement).
	oneStatement bool
	// whole acknowledges a batch the broker took whole: acknowledgeAll (one statement) where
	// the database can, the fenced transaction otherwise. Chosen once, by New.
	whole func(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record) (relay.Outcome, map[int]int, error)
}

// New returns the acknowledger of core's store.
func New(core relay.Core) *Acknowledger {
	a := &Acknowledger{core: core, oneStatement: core.Store.SQL().AcksInOneStatement()}
	a.whole = func(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record) (relay.Outcome, map[int]int, error) {
		return a.inTx(ctx, worker, leases, acked, nil, nil, 0)
	}
	if a.oneStatement {
		a.whole = a.acknowledgeAll
	}
	return a
}

// OneStatement reports whether a batch the broker took whole is acknowledged in one statement.
func (a *Acknowledger) OneStatement() bool { return a.oneStatement }

// Acknowledge deletes (or marks) the published records and writes the settlements of the failed
// ones, in one short transaction that first fences the leases: the rows of partitions this relay
// lost meanwhile are left to their new owner and counted. It returns what it wrote and the
// partitions lost.
func (a *Acknowledger) Acknowledge(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement) (relay.Outcome, map[int]int, error) {
	return a.AcknowledgeMarked(ctx, worker, leases, acked, settled, nil, 0)
}

// AcknowledgeMarked is Acknowledge for exactly-once delivery, with units transactional units: in
// the same transaction, it records the checkpoints of marks as cleaned, for the partitions of
// their units this relay still owns,
// so that the next opening of a unit does not apply its checkpoint to them again.
func (a *Acknowledger) AcknowledgeMarked(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement,
	marks []relay.UnitMark, units int) (relay.Outcome, map[int]int, error) {
	ackCtx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), relay.AckTimeout)
	defer cancelAck()
	if len(settled) == 0 && len(marks) == 0 {
		return a.whole(ackCtx, worker, leases, acked)
	}
	return a.inTx(ackCtx, worker, leases, acked, settled, marks, units)
}

// inTx is the fenced acknowledgement transaction.
func (a *Acknowledger) inTx(ackCtx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement,
	marks []relay.UnitMark, units int) (relay.Outcome, map[int]int, error) {
	var o relay.Outcome
	var lost map[int]int
	err := a.core.Store.InLeaseTx(ackCtx, a.core.DB, func(tx *sql.Tx) error {
		owned, err := a.core.Store.Fence(ackCtx, tx, a.core.RelayID, leases)
		if err != nil {
			return err
		}
		o, lost = relay.Outcome{}, map[int]int{}
		seqs := make([]int64, 0, len(acked))
		for _, r := range acked {
			if !owned[r.Partition] {
				lost[r.Partition]++
				continue
			}
			o.Acked = append(o.Acked, r)
			seqs = append(seqs, r.Seq)
		}
		if err := a.core.Store.Ack(ackCtx, tx, seqs, a.core.Retention > 0); err != nil {
			return err
		}
		for _, st := range settled {
			if !owned[st.Record.Partition] {
				lost[st.Record.Partition]++
				continue
			}
			if err := a.core.Store.Fail(ackCtx, tx, st.Record.Seq, st.Attempts, st.Next, st.Dead, st.Reason); err != nil {
				return err
			}
			o.Settled = append(o.Settled, st)
		}
		return a.core.Store.MarkCleaned(ackCtx, tx, OwnedUnitMarks(marks, owned, units))
	})
	if err != nil {
		return relay.Outcome{}, nil, fmt.Errorf("acknowledge %d published and %d failed rows: %w", len(acked), len(settled), err)
	}
	o.Fenced = a.acknowledged(worker, o.Acked, lost)
	return o, lost, nil
}

// OwnedUnitMarks keeps the marks of the units with an owned partition: whole for the units all
// of whose partitions are owned, and with the owned partitions as settled for the others (the
// acknowledgement settles the checkpoint's rows of those only, and the unit's next opening applies
// the checkpoint to the rest).
func OwnedUnitMarks(marks []relay.UnitMark, owned map[int]bool, units int) []relay.UnitMark {
	var out []relay.UnitMark
	for _, m := range marks {
		var settled uint64
		whole := true
		for p := m.Unit; p < outbox.Partitions; p += units {
			if owned[p] {
				settled |= 1 << uint(p)
			} else {
				whole = false
			}
		}
		if settled == 0 {
			continue
		}
		if !whole {
			m.Settled = settled
		}
		out = append(out, m)
	}
	return out
}

// acknowledgeAll is acknowledge for records the broker all acknowledged, in one statement
// (Store.AckFenced) instead of a transaction of five round trips, on the databases that can
// (sqlstore.OneStatementAcker: PostgreSQL). Most batches of either source are such batches; a
// batch with failures or exactly-once marks takes the transaction.
func (a *Acknowledger) acknowledgeAll(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record) (relay.Outcome, map[int]int, error) {
	if len(acked) == 0 {
		return relay.Outcome{}, map[int]int{}, nil
	}
	seqs := make([]int64, len(acked))
	for i, r := range acked {
		seqs[i] = r.Seq
	}
	owned, err := a.core.Store.AckFenced(ctx, a.core.DB, a.core.RelayID, leases, seqs, a.core.Retention > 0)
	if err != nil {
		return relay.Outcome{}, nil, fmt.Errorf("acknowledge %d published rows: %w", len(acked), err)
	}
	var o relay.Outcome
	lost := map[int]int{}
	for _, r := range acked {
		if !owned[r.Partition] {
			lost[r.Partition]++
			continue
		}
		o.Acked = append(o.Acked, r)
	}
	o.Fenced = a.acknowledged(worker, o.Acked, lost)
	return o, lost, nil
}

// acknowledged counts what an acknowledgement kept and what it left to the partitions' new
// owners, and returns the number of rows left.
func (a *Acknowledger) acknowledged(worker int, kept []relay.Record, lost map[int]int) int {
	rows := 0
	for _, n := range lost {
		rows += n
	}
	if rows > 0 {
		a.core.Metrics.FencedRows.Add(float64(rows))
		a.core.Log.Warn("lost the lease of partitions during a batch: their rows are left to the new owner",
			"worker", worker, "partitions", len(lost), "rows", rows)
	}
	a.observeAcked(kept)
	return rows
}

func (a *Acknowledger) observeAcked(acked []relay.Record) {
	type label struct{ topic, tenant string }
	counts := map[label]int{}
	now := time.Now()
	for _, r := range acked {
		counts[label{r.Event.Topic, r.Event.TenantID}]++
		a.core.Metrics.CommitToAck.WithLabelValues(r.Event.TenantID).Observe(now.Sub(r.Event.CreatedAt).Seconds())
	}
	for l, n := range counts {
		a.core.Metrics.Relayed.WithLabelValues(l.topic, l.tenant).Add(float64(n))
	}
}
