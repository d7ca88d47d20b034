package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The end of every batch: the rows the broker acknowledged are deleted (or marked) and the
// failures settled, fenced by the leases' epochs.

// acknowledge deletes (or marks) the published records and writes the settlements of the failed
// ones, in one short transaction that first fences the leases: the rows of partitions this relay
// lost meanwhile are left to their new owner and counted. It returns what it wrote and the
// partitions lost.
func (f *Forwarder) acknowledge(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement) (relay.Outcome, map[int]int, error) {
	return f.acknowledgeUnits(ctx, worker, leases, acked, settled, nil)
}

// acknowledgeUnits is acknowledge for exactly-once delivery: in the same transaction, it records
// the checkpoints of marks as cleaned, for the partitions of their units this relay still owns,
// so that the next opening of a unit does not apply its checkpoint to them again.
func (f *Forwarder) acknowledgeUnits(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement,
	marks []relay.UnitMark) (relay.Outcome, map[int]int, error) {
	ackCtx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), relay.AckTimeout)
	defer cancelAck()
	if f.ackInOneStatement && len(settled) == 0 && len(marks) == 0 {
		return f.acknowledgeAll(ackCtx, worker, leases, acked)
	}
	var o relay.Outcome
	var lost map[int]int
	err := f.store.InLeaseTx(ackCtx, f.cfg.DB, func(tx *sql.Tx) error {
		owned, err := f.store.Fence(ackCtx, tx, f.cfg.RelayID, leases)
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
		if err := f.store.Ack(ackCtx, tx, seqs, f.cfg.Retention > 0); err != nil {
			return err
		}
		for _, st := range settled {
			if !owned[st.Record.Partition] {
				lost[st.Record.Partition]++
				continue
			}
			if err := f.store.Fail(ackCtx, tx, st.Record.Seq, st.Attempts, st.Next, st.Dead, st.Reason); err != nil {
				return err
			}
			o.Settled = append(o.Settled, st)
		}
		return f.store.MarkCleaned(ackCtx, tx, f.ownedUnitMarks(marks, owned))
	})
	if err != nil {
		return relay.Outcome{}, nil, fmt.Errorf("acknowledge %d published and %d failed rows: %w", len(acked), len(settled), err)
	}
	o.Fenced = f.acknowledged(worker, o.Acked, lost)
	return o, lost, nil
}

// ownedUnitMarks keeps the marks of the units with an owned partition: whole for the units all
// of whose partitions are owned, and with the owned partitions as settled for the others (the
// acknowledgement settles the checkpoint's rows of those only, and the unit's next opening applies
// the checkpoint to the rest).
func (f *Forwarder) ownedUnitMarks(marks []relay.UnitMark, owned map[int]bool) []relay.UnitMark {
	var out []relay.UnitMark
	for _, m := range marks {
		var settled uint64
		whole := true
		for p := m.Unit; p < outbox.Partitions; p += f.cfg.TransactionalUnits {
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
// (store.ackFenced) instead of a transaction of five round trips, on the databases that can
// (sqlstore.OneStatementAcker: PostgreSQL). Most batches of either source are such batches; a
// batch with failures or exactly-once marks takes the transaction.
func (f *Forwarder) acknowledgeAll(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record) (relay.Outcome, map[int]int, error) {
	if len(acked) == 0 {
		return relay.Outcome{}, map[int]int{}, nil
	}
	seqs := make([]int64, len(acked))
	for i, r := range acked {
		seqs[i] = r.Seq
	}
	owned, err := f.store.AckFenced(ctx, f.cfg.DB, f.cfg.RelayID, leases, seqs, f.cfg.Retention > 0)
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
	o.Fenced = f.acknowledged(worker, o.Acked, lost)
	return o, lost, nil
}

// acknowledged counts what an acknowledgement kept and what it left to the partitions' new
// owners, and returns the number of rows left.
func (f *Forwarder) acknowledged(worker int, kept []relay.Record, lost map[int]int) int {
	rows := 0
	for _, n := range lost {
		rows += n
	}
	if rows > 0 {
		f.metrics.FencedRows.Add(float64(rows))
		f.log.Warn("lost the lease of partitions during a batch: their rows are left to the new owner",
			"worker", worker, "partitions", len(lost), "rows", rows)
	}
	f.observeAcked(kept)
	return rows
}

func (f *Forwarder) observeAcked(acked []relay.Record) {
	type label struct{ topic, tenant string }
	counts := map[label]int{}
	now := time.Now()
	for _, r := range acked {
		counts[label{r.Event.Topic, r.Event.TenantID}]++
		f.metrics.CommitToAck.WithLabelValues(r.Event.TenantID).Observe(now.Sub(r.Event.CreatedAt).Seconds())
	}
	for l, n := range counts {
		f.metrics.Relayed.WithLabelValues(l.topic, l.tenant).Add(float64(n))
	}
}
