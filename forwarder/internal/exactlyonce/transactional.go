package exactlyonce

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// The transactions of a batch: one per unit, units in parallel; a unit's failed events are
// dropped from its transaction in rounds, then the committed rows acknowledged in one fenced
// acknowledgement with the units' checkpoint marks.

// maxTransactionRounds bounds the transactions tried for one unit's batch: each round
// drops the keys whose events failed in the previous one.
const maxTransactionRounds = 3

// unitOutcome is what one unit's transactions did to its records.
type unitOutcome struct {
	acked   []relay.Record
	settled []relay.Settlement
	// checkpoint is the checkpoint of the committed transaction, nil if none committed.
	checkpoint []byte
	// notTried are the records whose failure was an outage (relay.RetryPolicy.Unblamed): left
	// pending, untouched, with their keys' later records, and no attempt counted.
	notTried []relay.Failure
	err      error
}

// deliverTransactional is Deliver's work: a transaction per unit of the batch, units
// in parallel, then one fenced acknowledgement of the committed rows, whose outcome it returns.
// A unit is used only while the worker leases all of its partitions; the rows of a unit leased
// in part wait (the heartbeat gives such partitions up, so that a relay can take the unit whole).
func (d *Deliverer) deliverTransactional(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	jobs := d.unitJobs(leases, records)
	// The units are locked in ascending order (two batches sharing units cannot deadlock) until
	// their rows are acknowledged.
	for _, j := range jobs {
		u := d.txUnits.get(j.unit)
		u.mu.Lock()
		defer u.mu.Unlock()
	}
	publishCtx, cancelPublish := context.WithTimeout(context.WithoutCancel(ctx), d.core.LeaseTTL)
	started := time.Now()
	outcomes := make([]unitOutcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { outcomes[i] = d.commitUnit(publishCtx, j.unit, j.leases, j.records) })
	}
	wg.Wait()
	cancelPublish()
	d.core.Metrics.PublishSeconds.Observe(time.Since(started).Seconds())

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
		if len(o.notTried) > 0 {
			errs = append(errs, fmt.Errorf("unit %d: %w", jobs[i].unit, relay.NotTried(d.core.Metrics, o.notTried)))
		}
		if o.checkpoint != nil {
			marks = append(marks, relay.UnitMark{Unit: jobs[i].unit, Name: d.unitName(jobs[i].unit), Digest: relay.CheckpointDigest(o.checkpoint)})
		}
	}
	if len(acked) == 0 && len(settled) == 0 {
		if len(errs) > 0 {
			return relay.Outcome{}, fmt.Errorf("exactly-once delivery: %v", errs)
		}
		return relay.Outcome{}, nil
	}
	result, lost, err := d.acker.AcknowledgeMarked(ctx, worker, leases, acked, settled, marks, d.units)
	d.afterUnitsAcknowledged(jobs, outcomes, lost, err)
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
func (d *Deliverer) unitJobs(leases []relay.Lease, records []relay.Record) []unitJob {
	unitLeases := d.wholeUnitLeases(leases)
	byUnit := map[int][]relay.Record{}
	for _, r := range records {
		u := r.Partition % d.units
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
func (d *Deliverer) afterUnitsAcknowledged(jobs []unitJob, outcomes []unitOutcome, lost map[int]int, ackErr error) {
	lostUnits := map[int]bool{}
	for p := range lost {
		lostUnits[p%d.units] = true
	}
	for i, o := range outcomes {
		switch u := jobs[i].unit; {
		case ackErr != nil && o.checkpoint != nil, lostUnits[u]:
			d.closeUnit(u)
		case ackErr == nil && o.checkpoint != nil:
			d.txUnits.get(u).cleaned = o.checkpoint
		}
	}
}

// pendingDead is a record to dead-letter in the next transaction.
type pendingDead struct {
	record relay.Record
	// attempts counts the record's failed attempts, this one included: of its event, then of
	// its dead letter alone once they are spent. The dead letter, the checkpoint and the dead
	// row carry the event's publishes (relay.RetryPolicy.Published).
	attempts int
	reason   string
	slim     bool // the dead letter goes without its payload (the broker refused it whole)
	// retriable is how the event's error was classified (for the dead-lettered log line).
	retriable bool
}

// spentDeadLetters are the dead letters of records whose attempts are spent (their dead letter
// failed after the last one; deadletter.SplitSpent took them out of the batch): they go in the
// unit's transaction without their event, so that max_attempts bounds the transactions that
// carry an event. Each is an attempt of the dead letter alone; it goes whole once more, then,
// past that, reduced from the start (as any dead letter past the event's budget), so that one
// refused even reduced ends dead in the table instead of looping.
func spentDeadLetters(p relay.RetryPolicy, records []relay.Record) []pendingDead {
	dead := make([]pendingDead, len(records))
	for i, r := range records {
		dead[i] = pendingDead{record: r, attempts: r.Attempts + 1, reason: deadletter.SpentReason(p.MaxAttempts), slim: p.PastBudget(r.Attempts),
			retriable: true}
	}
	return dead
}

// commitUnit publishes one unit's records, in order, in transactions of the unit. A failed
// event parks its key as on the at-least-once path: the transaction is aborted, the key's
// records are dropped from it, and the rest are committed in the next round.
func (d *Deliverer) commitUnit(ctx context.Context, n int, leases []relay.Lease, records []relay.Record) unitOutcome {
	var out unitOutcome
	u := d.txUnits.get(n)
	unit := d.unitName(n)
	spent, pending := deadletter.SplitSpent(d.core.Retry, records)
	dead := spentDeadLetters(d.core.Retry, spent)
	for round := 1; ; round++ {
		if !u.open {
			lost, err := d.openUnit(ctx, n, leases, u)
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
			dead = slices.DeleteFunc(dead, func(pd pendingDead) bool { return u.recovered[pd.record.Seq] })
			out.settled = slices.DeleteFunc(out.settled, func(st relay.Settlement) bool { return u.recovered[st.Record.Seq] })
			u.recovered = nil
		}
		if len(pending) == 0 && len(dead) == 0 {
			return out
		}
		topics, msgs := d.transactionMessages(ctx, pending, dead)
		cp, err := d.checkpointOf(unit, pending, dead)
		if err != nil {
			out.err = err
			return out
		}
		errs, err := d.txp.CommitUnit(ctx, unit, topics, msgs, cp)
		if err == nil {
			d.core.Metrics.TxCommitted.Inc()
			out.acked, out.checkpoint = pending, cp
			for _, pd := range dead {
				out.settled = append(out.settled, d.settler.DeadLettered(pd.record, d.core.Retry.Published(pd.attempts), pd.reason, pd.slim, pd.retriable))
			}
			return out
		}
		d.core.Metrics.TxAborted.Inc()
		u.open = false // CommitUnit closed the session
		failedAny := false
		for _, e := range errs {
			failedAny = failedAny || e != nil
		}
		if !failedAny || round == maxTransactionRounds {
			// Nothing known failed on its own (a commit of unknown outcome, fencing): the rows stay
			// pending; opening the unit again finds out whether the transaction committed.
			for _, pd := range dead {
				out.settled = append(out.settled, d.settler.RetryLater(pd.record, pd.attempts, pd.reason))
			}
			out.err = fmt.Errorf("transaction of unit %s: %w", unit, err)
			return out
		}
		pending, dead, out.settled, out.notTried = d.afterAbort(pending, dead, errs, out.settled, out.notTried)
	}
}

// afterAbort sorts the outcome of an aborted transaction: the first failed record of each key
// is settled (a retry later, parking its key, or a dead letter in the next transaction), or,
// when its failure is an outage (relay.RetryPolicy.Unblamed), left pending untouched in
// notTried; the key's later records wait for the next batch; failed dead letters are handled
// by afterDeadLetterAbort.
func (d *Deliverer) afterAbort(pending []relay.Record, dead []pendingDead, errs []error, settled []relay.Settlement,
	notTried []relay.Failure) ([]relay.Record, []pendingDead, []relay.Settlement, []relay.Failure) {
	blocked := map[int64]bool{}
	var next []relay.Record
	var nextDead []pendingDead
	for i, r := range pending {
		switch {
		case blocked[r.KeyHash]:
		case errs[i] != nil && d.core.Retry.Unblamed(errs[i]):
			blocked[r.KeyHash] = true
			notTried = append(notTried, relay.Failure{Record: r, Err: errs[i]})
		case errs[i] != nil:
			blocked[r.KeyHash] = true
			attempts, reason, dead := d.settler.Failed(r, errs[i])
			if dead {
				// An event past its retry budget (retried without limit; a spent one is not
				// published at all, see spentDeadLetters): its dead letter goes reduced from the
				// start (the transactions of a batch are too few to try both forms each time), so
				// that one refused even reduced ends dead (afterDeadLetterAbort) instead of looping.
				reduced := d.core.Retry.PastBudget(attempts)
				nextDead = append(nextDead, pendingDead{record: r, attempts: attempts, reason: reason, slim: reduced,
					retriable: d.core.Retry.Retriable(errs[i])})
				continue
			}
			settled = append(settled, d.settler.RetryLater(r, attempts, reason))
		default:
			next = append(next, r)
		}
	}
	for j, pd := range dead {
		var st *relay.Settlement
		nextDead, st = d.afterDeadLetterAbort(pd, errs[len(pending)+j], nextDead)
		if st != nil {
			settled = append(settled, *st)
		}
	}
	return next, nextDead, settled, notTried
}

// afterDeadLetterAbort sorts one dead letter of an aborted transaction by the dead-letter
// sequence (deadletter.Next): kept for the next transaction when it did not fail itself; when
// the broker refused it for good, sent reduced in the next one, or, if it was reduced already,
// settled dead in the table without a dead letter; otherwise retried later.
func (d *Deliverer) afterDeadLetterAbort(pd pendingDead, err error, nextDead []pendingDead) ([]pendingDead, *relay.Settlement) {
	var st relay.Settlement
	switch deadletter.Next(pd.slim, err, err != nil && d.core.Retry.FinalDeadLetterError(pd.attempts, err)) {
	case deadletter.Sent:
		return append(nextDead, pd), nil
	case deadletter.SendReduced:
		pd.slim = true
		return append(nextDead, pd), nil
	case deadletter.Refused:
		st = d.settler.Refused(pd.record, d.core.Retry.Published(pd.attempts), pd.reason, err)
	default:
		st = d.settler.RetryLater(pd.record, pd.attempts, deadletter.RetryReason(pd.reason, d.core.DeadLetterTopic, err))
	}
	return nextDead, &st
}

// transactionMessages are the messages of one transaction: the records' events, then the dead
// letters (whole, or reduced when pd.slim; see deadletter.Message).
func (d *Deliverer) transactionMessages(ctx context.Context, pending []relay.Record, dead []pendingDead) ([]string, []*message.Message) {
	topics := make([]string, 0, len(pending)+len(dead))
	msgs := relay.Messages(ctx, pending)
	for _, r := range pending {
		topics = append(topics, r.Event.Topic)
	}
	for _, pd := range dead {
		topics = append(topics, d.core.DeadLetterTopic)
		msgs = append(msgs, deadletter.Message(ctx, pd.record.Event, pd.reason, d.core.Retry.Published(pd.attempts), pd.slim))
	}
	return topics, msgs
}

// checkpointOf encodes the checkpoint of a transaction holding pending and dead.
func (d *Deliverer) checkpointOf(unit string, pending []relay.Record, dead []pendingDead) ([]byte, error) {
	cp := bookkeeping.Checkpoint{Version: bookkeeping.CheckpointVersion, Installation: d.installation, Unit: unit, Relay: d.core.RelayID,
		Txn: d.txUnits.txn.Add(1), Time: time.Now().UTC(), Rows: make([]bookkeeping.RowRef, len(pending))}
	for i, r := range pending {
		cp.Rows[i] = bookkeeping.RowRef{Seq: r.Seq, EventID: r.Event.ID.String()}
	}
	for _, pd := range dead {
		cp.Dead = append(cp.Dead, bookkeeping.DeadRow{Seq: pd.record.Seq, EventID: pd.record.Event.ID.String(),
			Attempts: d.core.Retry.Published(pd.attempts), Reason: relay.TruncateUTF8(deadletter.SentReason(pd.reason, pd.slim), deadletter.MaxReason)})
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint of unit %s: %w", unit, err)
	}
	return data, nil
}
