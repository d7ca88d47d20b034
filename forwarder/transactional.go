package forwarder

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Exactly-once delivery (docs/exactly-once.md). The partitions are grouped into
// Config.TransactionalUnits units (unit u holds the partitions p with p % units == u), each
// with a stable name (unitName), leased whole (lease.Units). A batch is published per unit
// in one broker transaction holding its events, its dead letters and a checkpoint listing its
// rows; only after the commit are the rows deleted (or marked), in the usual fenced
// acknowledgement. Opening a unit fences
// its earlier sessions in the broker and returns its last committed checkpoint, whose rows the
// opener deletes or marks (fenced by its own lease) before publishing anything, so a crash
// between the commit and the acknowledgement publishes nothing twice. A unit runs its
// transactions one after the other: it begins the next only after the rows of the last one
// are acknowledged, so at most its last checkpoint can name rows still in the table.

// maxTransactionRounds bounds the transactions tried for one unit's batch: each round
// drops the keys whose events failed in the previous one.
const maxTransactionRounds = 3

// unitOutcome is what one unit's transactions did to its records.
type unitOutcome struct {
	acked   []relay.Record
	settled []relay.Settlement
	// checkpoint is the checkpoint of the committed transaction, nil if none committed.
	checkpoint []byte
	err        error
}

// deliverTransactional is deliver for ExactlyOnce: a transaction per unit of the batch, units
// in parallel, then one fenced acknowledgement of the committed rows, whose outcome it returns.
// A unit is used only while the worker leases all of its partitions; the rows of a unit leased
// in part wait (the heartbeat gives such partitions up, so that a relay can take the unit whole).
func (f *Forwarder) deliverTransactional(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	jobs := f.unitJobs(leases, records)
	// The units are locked in ascending order (two batches sharing units cannot deadlock) until
	// their rows are acknowledged.
	for _, j := range jobs {
		u := f.units.get(j.unit)
		u.mu.Lock()
		defer u.mu.Unlock()
	}
	publishCtx, cancelPublish := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.LeaseTTL)
	started := time.Now()
	outcomes := make([]unitOutcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { outcomes[i] = f.commitUnit(publishCtx, j.unit, j.leases, j.records) })
	}
	wg.Wait()
	cancelPublish()
	f.metrics.PublishSeconds.Observe(time.Since(started).Seconds())

	var acked []relay.Record
	var settled []relay.Settlement
	var errs []error
	var marks []relay.UnitMark
	for i, o := range outcomes {
		acked = append(acked, o.acked...)
		settled = append(settled, o.settled...)
		if o.err != nil {
			errs = append(errs, fmt.Errorf("unit %d: %w", jobs[i].unit, o.err))
		}
		if o.checkpoint != nil {
			marks = append(marks, relay.UnitMark{Unit: jobs[i].unit, Name: f.unitName(jobs[i].unit), Digest: relay.CheckpointDigest(o.checkpoint)})
		}
	}
	if len(acked) == 0 && len(settled) == 0 {
		if len(errs) > 0 {
			return relay.Outcome{}, fmt.Errorf("exactly-once delivery: %v", errs)
		}
		return relay.Outcome{}, nil
	}
	result, lost, err := f.acker.AcknowledgeMarked(ctx, worker, leases, acked, settled, marks, f.cfg.TransactionalUnits)
	f.afterUnitsAcknowledged(jobs, outcomes, lost, err)
	if err != nil {
		return relay.Outcome{}, err
	}
	if len(errs) > 0 {
		return result, fmt.Errorf("exactly-once delivery: %v", errs)
	}
	return result, nil
}

// unitJob is one unit's share of a batch: its leases and records.
type unitJob struct {
	unit    int
	leases  []relay.Lease
	records []relay.Record
}

// unitJobs groups records by transactional unit, in ascending unit order, keeping the units
// leased whole.
func (f *Forwarder) unitJobs(leases []relay.Lease, records []relay.Record) []unitJob {
	unitLeases := f.wholeUnitLeases(leases)
	byUnit := map[int][]relay.Record{}
	for _, r := range records {
		u := r.Partition % f.cfg.TransactionalUnits
		byUnit[u] = append(byUnit[u], r)
	}
	var jobs []unitJob
	for u, recs := range byUnit {
		if ls, whole := unitLeases[u]; whole {
			jobs = append(jobs, unitJob{u, ls, recs})
		}
	}
	slices.SortFunc(jobs, func(a, b unitJob) int { return a.unit - b.unit })
	return jobs
}

// afterUnitsAcknowledged keeps the units' state true after the acknowledgement of their
// transactions: when it failed, the units that committed are closed (the commits stand, and the
// next opening of each cleans up their rows); the units whose partitions were lost meanwhile are
// closed; the others remember their checkpoint as cleaned.
func (f *Forwarder) afterUnitsAcknowledged(jobs []unitJob, outcomes []unitOutcome, lost map[int]int, ackErr error) {
	lostUnits := map[int]bool{}
	for p := range lost {
		lostUnits[p%f.cfg.TransactionalUnits] = true
	}
	for i, o := range outcomes {
		switch u := jobs[i].unit; {
		case ackErr != nil && o.checkpoint != nil, lostUnits[u]:
			f.closeUnit(u)
		case ackErr == nil && o.checkpoint != nil:
			f.units.get(u).cleaned = o.checkpoint
		}
	}
}

// pendingDead is a record to dead-letter in the next transaction.
type pendingDead struct {
	record   relay.Record
	attempts int
	reason   string
	slim     bool // the dead letter goes without its payload (the broker refused it whole)
}

// commitUnit publishes one unit's records, in order, in transactions of the unit. A failed
// event parks its key as on the at-least-once path: the transaction is aborted, the key's
// records are dropped from it, and the rest are committed in the next round.
func (f *Forwarder) commitUnit(ctx context.Context, n int, leases []relay.Lease, records []relay.Record) unitOutcome {
	var out unitOutcome
	u := f.units.get(n)
	unit := f.unitName(n)
	pending := records
	var dead []pendingDead
	for round := 1; ; round++ {
		if !u.open {
			lost, err := f.openUnit(ctx, n, leases, u)
			if lost {
				// Not a silent success: the records were neither published nor settled (the cdc
				// source would otherwise count its part as done).
				err = fmt.Errorf("unit %s: %w", unit, errUnitLost)
			}
			if err != nil {
				out.err = err
				return out
			}
		}
		if u.recovered != nil {
			// Rows of the checkpoint just cleaned up were published (or dead-lettered) by the
			// unit's last transaction: none of them may be sent or settled again.
			pending = slices.DeleteFunc(pending, func(r relay.Record) bool { return u.recovered[r.Seq] })
			dead = slices.DeleteFunc(dead, func(d pendingDead) bool { return u.recovered[d.record.Seq] })
			out.settled = slices.DeleteFunc(out.settled, func(st relay.Settlement) bool { return u.recovered[st.Record.Seq] })
			u.recovered = nil
		}
		if len(pending) == 0 && len(dead) == 0 {
			return out
		}
		topics, msgs := f.transactionMessages(ctx, pending, dead)
		cp, err := f.checkpointOf(unit, pending, dead)
		if err != nil {
			out.err = err
			return out
		}
		errs, err := f.txp.CommitUnit(ctx, unit, topics, msgs, cp)
		if err == nil {
			f.metrics.TxCommitted.Inc()
			out.acked, out.checkpoint = pending, cp
			for _, d := range dead {
				f.metrics.DeadLettered.WithLabelValues(d.record.Event.Topic, d.record.Event.TenantID).Inc()
				out.settled = append(out.settled, relay.Settlement{Record: d.record, Attempts: d.attempts, Next: time.Now(), Dead: true, Reason: d.reason})
			}
			return out
		}
		f.metrics.TxAborted.Inc()
		u.open = false // CommitUnit closed the session
		failedAny := false
		for _, e := range errs {
			failedAny = failedAny || e != nil
		}
		if !failedAny || round == maxTransactionRounds {
			// Nothing known failed on its own (a commit of unknown outcome, fencing): the rows stay
			// pending; opening the unit again finds out whether the transaction committed.
			for _, d := range dead {
				out.settled = append(out.settled, f.settler.RetryLater(d.record, d.attempts, d.reason))
			}
			out.err = fmt.Errorf("transaction of unit %s: %w", unit, err)
			return out
		}
		pending, dead, out.settled = f.afterAbort(pending, dead, errs, out.settled)
	}
}

// afterAbort sorts the outcome of an aborted transaction: the first failed record of each key
// is settled (a retry later, parking its key, or a dead letter in the next transaction), the
// key's later records wait for the next batch; failed dead letters are handled by
// afterDeadLetterAbort.
func (f *Forwarder) afterAbort(pending []relay.Record, dead []pendingDead, errs []error, settled []relay.Settlement) ([]relay.Record, []pendingDead, []relay.Settlement) {
	blocked := map[int64]bool{}
	var next []relay.Record
	var nextDead []pendingDead
	for i, r := range pending {
		switch {
		case blocked[r.KeyHash]:
		case errs[i] != nil:
			blocked[r.KeyHash] = true
			attempts := r.Attempts + 1
			reason := errs[i].Error()
			f.metrics.Failed.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
			if f.retry.Dead(attempts, errs[i]) {
				// An event past its retry budget has had a dead letter refused before (the
				// transactions of a batch are too few to try both forms each time), or retried
				// without limit: its dead letter goes reduced from the start, so that one refused
				// even reduced ends dead (afterDeadLetterAbort) instead of looping.
				reduced := f.retry.PastBudget(attempts)
				nextDead = append(nextDead, pendingDead{record: r, attempts: attempts, reason: reason, slim: reduced})
				continue
			}
			settled = append(settled, f.settler.RetryLater(r, attempts, reason))
		default:
			next = append(next, r)
		}
	}
	for j, d := range dead {
		var st *relay.Settlement
		nextDead, st = f.afterDeadLetterAbort(d, errs[len(pending)+j], nextDead)
		if st != nil {
			settled = append(settled, *st)
		}
	}
	return next, nextDead, settled
}

// afterDeadLetterAbort sorts one dead letter of an aborted transaction by the dead-letter
// sequence (deadletter.Next): kept for the next transaction when it did not fail itself; when
// the broker refused it for good, sent reduced in the next one, or, if it was reduced already,
// settled dead in the table without a dead letter; otherwise retried later.
func (f *Forwarder) afterDeadLetterAbort(d pendingDead, err error, nextDead []pendingDead) ([]pendingDead, *relay.Settlement) {
	var st relay.Settlement
	switch deadletter.Next(d.slim, err, err != nil && f.retry.FinalDeadLetterError(d.attempts, err)) {
	case deadletter.Sent:
		return append(nextDead, d), nil
	case deadletter.SendReduced:
		d.slim = true
		return append(nextDead, d), nil
	case deadletter.Refused:
		st = f.settler.Refused(d.record, d.attempts, d.reason, err)
	default:
		st = f.settler.RetryLater(d.record, d.attempts, deadletter.RetryReason(d.reason, f.cfg.DeadLetterTopic, err))
	}
	return nextDead, &st
}

// transactionMessages are the messages of one transaction: the records' events, then the dead
// letters (whole, or reduced when d.slim; see deadletter.Message).
func (f *Forwarder) transactionMessages(ctx context.Context, pending []relay.Record, dead []pendingDead) ([]string, []*message.Message) {
	topics := make([]string, 0, len(pending)+len(dead))
	msgs := relay.Messages(ctx, pending)
	for _, r := range pending {
		topics = append(topics, r.Event.Topic)
	}
	for _, d := range dead {
		topics = append(topics, f.cfg.DeadLetterTopic)
		msgs = append(msgs, deadletter.Message(ctx, d.record.Event, d.reason, d.attempts, d.slim))
	}
	return topics, msgs
}

// checkpointOf encodes the checkpoint of a transaction holding pending and dead.
func (f *Forwarder) checkpointOf(unit string, pending []relay.Record, dead []pendingDead) ([]byte, error) {
	cp := checkpoint{Version: checkpointVersion, Installation: f.installation, Unit: unit, Relay: f.cfg.RelayID,
		Txn: f.units.txn.Add(1), Time: time.Now().UTC(), Rows: make([]rowRef, len(pending))}
	for i, r := range pending {
		cp.Rows[i] = rowRef{Seq: r.Seq, EventID: r.Event.ID.String()}
	}
	for _, d := range dead {
		cp.Dead = append(cp.Dead, deadRow{Seq: d.record.Seq, EventID: d.record.Event.ID.String(),
			Attempts: d.attempts, Reason: relay.TruncateUTF8(d.reason, deadletter.MaxReason)})
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint of unit %s: %w", unit, err)
	}
	return data, nil
}
