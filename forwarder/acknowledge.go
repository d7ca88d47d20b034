package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The end of every batch: the rows the broker acknowledged are deleted (or marked) and the
// failures settled, fenced by the leases' epochs.

// acknowledge deletes (or marks) the published records and writes the settlements of the failed
// ones, in one short transaction that first fences the leases: the rows of partitions this relay
// lost meanwhile are left to their new owner and counted. It returns the partitions lost.
func (f *Forwarder) acknowledge(ctx context.Context, worker int, leases []lease, acked []record, settled []settlement) (map[int]int, error) {
	return f.acknowledgeUnits(ctx, worker, leases, acked, settled, nil)
}

// acknowledgeUnits is acknowledge for exactly-once delivery: in the same transaction, it records
// the checkpoints of marks as cleaned, for the units whose partitions this relay still owns, so
// that the next opening of a unit does not apply its checkpoint again.
func (f *Forwarder) acknowledgeUnits(ctx context.Context, worker int, leases []lease, acked []record, settled []settlement,
	marks []unitMark) (map[int]int, error) {
	ackCtx, cancelAck := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancelAck()
	var kept []record
	var lost map[int]int
	if f.cfg.Source == SourceCDC && len(settled) == 0 && len(marks) == 0 {
		return f.acknowledgeAll(ackCtx, worker, leases, acked)
	}
	err := f.store.inLeaseTx(ackCtx, f.cfg.DB, func(tx *sql.Tx) error {
		owned, err := f.store.fence(ackCtx, tx, f.cfg.RelayID, leases)
		if err != nil {
			return err
		}
		kept, lost = kept[:0], map[int]int{}
		seqs := make([]int64, 0, len(acked))
		for _, r := range acked {
			if !owned[r.partition] {
				lost[r.partition]++
				continue
			}
			kept = append(kept, r)
			seqs = append(seqs, r.seq)
		}
		if err := f.store.ack(ackCtx, tx, seqs, f.cfg.Retention > 0); err != nil {
			return err
		}
		for _, st := range settled {
			if !owned[st.record.partition] {
				lost[st.record.partition]++
				continue
			}
			if err := f.store.fail(ackCtx, tx, st.record.seq, st.attempts, st.next, st.dead, st.reason); err != nil {
				return err
			}
		}
		return f.store.markCleaned(ackCtx, tx, f.ownedUnitMarks(marks, owned))
	})
	if err != nil {
		return nil, fmt.Errorf("acknowledge %d published and %d failed rows: %w", len(acked), len(settled), err)
	}
	f.acknowledged(worker, kept, lost)
	return lost, nil
}

// ownedUnitMarks keeps the marks of the units all of whose partitions are owned.
func (f *Forwarder) ownedUnitMarks(marks []unitMark, owned map[int]bool) []unitMark {
	var out []unitMark
	for _, m := range marks {
		whole := true
		for p := m.unit; p < outbox.Partitions; p += f.cfg.TransactionalUnits {
			whole = whole && owned[p]
		}
		if whole {
			out = append(out, m)
		}
	}
	return out
}

// acknowledgeAll is acknowledge for records the broker all acknowledged, in one statement
// (store.ackFenced) instead of a transaction of five round trips: what the cdc source's parts
// mostly are (PostgreSQL only). The polling source could use it on PostgreSQL too; its
// figures were measured with the transaction and it keeps it.
func (f *Forwarder) acknowledgeAll(ctx context.Context, worker int, leases []lease, acked []record) (map[int]int, error) {
	if len(acked) == 0 {
		return map[int]int{}, nil
	}
	seqs := make([]int64, len(acked))
	for i, r := range acked {
		seqs[i] = r.seq
	}
	owned, err := f.store.ackFenced(ctx, f.cfg.DB, f.cfg.RelayID, leases, seqs, f.cfg.Retention > 0)
	if err != nil {
		return nil, fmt.Errorf("acknowledge %d published rows: %w", len(acked), err)
	}
	kept, lost := acked[:0:0], map[int]int{}
	for _, r := range acked {
		if !owned[r.partition] {
			lost[r.partition]++
			continue
		}
		kept = append(kept, r)
	}
	f.acknowledged(worker, kept, lost)
	return lost, nil
}

// acknowledged counts what an acknowledgement kept and what it left to the partitions' new
// owners.
func (f *Forwarder) acknowledged(worker int, kept []record, lost map[int]int) {
	if len(lost) > 0 {
		rows := 0
		for _, n := range lost {
			rows += n
		}
		f.metrics.fencedRows.Add(float64(rows))
		f.log.Warn("lost the lease of partitions during a batch: their rows are left to the new owner",
			"worker", worker, "partitions", len(lost), "rows", rows)
	}
	f.observeAcked(kept)
}

func (f *Forwarder) observeAcked(acked []record) {
	type label struct{ topic, tenant string }
	counts := map[label]int{}
	now := time.Now()
	for _, r := range acked {
		counts[label{r.event.Topic, r.event.TenantID}]++
		f.metrics.commitToAck.WithLabelValues(r.event.TenantID).Observe(now.Sub(r.event.CreatedAt).Seconds())
	}
	for l, n := range counts {
		f.metrics.relayed.WithLabelValues(l.topic, l.tenant).Add(float64(n))
	}
}
