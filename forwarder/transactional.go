package forwarder

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// Exactly-once delivery (docs/exactly-once.md). The partitions are grouped into
// Config.TransactionalUnits units (unit u holds the partitions p with p % units == u), each
// with a stable name (unitName), leased whole (sharePolicy.whole). A batch is published per unit
// in one broker transaction
// holding its events, its dead letters and a checkpoint listing its rows; only after the commit
// are the rows deleted (or marked), in the usual fenced acknowledgement. Opening a unit fences
// its earlier sessions in the broker and returns its last committed checkpoint, whose rows the
// opener deletes or marks (fenced by its own lease) before publishing anything, so a crash
// between the commit and the acknowledgement publishes nothing twice. A unit runs its
// transactions one after the other: it begins the next only after the rows of the last one
// are acknowledged, so at most its last checkpoint can name rows still in the table.

// maxTransactionRounds bounds the transactions tried for one unit's batch: each round
// drops the keys whose events failed in the previous one.
const maxTransactionRounds = 3

// txUnits are the transactional units of a forwarder, by unit number.
type txUnits struct {
	mu    sync.Mutex
	units map[int]*txUnit
	txn   atomic.Int64 // numbers the checkpoints this forwarder writes
}

// txUnit is the state of one unit. A batch holds mu while it uses the unit (opens it, commits
// its transaction, acknowledges the rows): with polling only the worker serving the unit's
// partitions uses it, with the cdc source its stream worker and the retry path may both have
// rows of it, and a unit runs one transaction at a time.
type txUnit struct {
	mu   sync.Mutex
	open bool
	// cleaned is the last checkpoint whose rows are known to be acknowledged.
	cleaned []byte
	// recovered lists the rows of the checkpoint found when the unit was last opened: rows of a
	// batch claimed before the opening that must not be published again.
	recovered map[int64]bool
	// foreignLogged is when a refused checkpoint of another installation was last logged.
	foreignLogged time.Time
}

func (u *txUnits) get(unit int) *txUnit {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.units == nil {
		u.units = map[int]*txUnit{}
	}
	t := u.units[unit]
	if t == nil {
		t = &txUnit{}
		u.units[unit] = t
	}
	return t
}

// unitOutcome is what one unit's transactions did to its records.
type unitOutcome struct {
	acked   []record
	settled []settlement
	// checkpoint is the checkpoint of the committed transaction, nil if none committed.
	checkpoint []byte
	err        error
}

// deliverTransactional is deliver for ExactlyOnce: a transaction per unit of the batch, units
// in parallel, then one fenced acknowledgement of the committed rows, whose outcome it returns.
// A unit is used only while the worker leases all of its partitions; the rows of a unit leased
// in part wait (the heartbeat gives such partitions up, so that a relay can take the unit whole).
func (f *Forwarder) deliverTransactional(ctx context.Context, worker int, leases []lease, records []record) (outcome, error) {
	unitLeases := f.wholeUnitLeases(leases)
	byUnit := map[int][]record{}
	for _, r := range records {
		u := r.partition % f.cfg.TransactionalUnits
		byUnit[u] = append(byUnit[u], r)
	}
	publishCtx, cancelPublish := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.LeaseTTL)
	started := time.Now()
	type job struct {
		unit    int
		leases  []lease
		records []record
	}
	var jobs []job
	for u, recs := range byUnit {
		if ls, whole := unitLeases[u]; whole {
			jobs = append(jobs, job{u, ls, recs})
		}
	}
	// The units are locked in ascending order (two batches sharing units cannot deadlock) until
	// their rows are acknowledged.
	slices.SortFunc(jobs, func(a, b job) int { return a.unit - b.unit })
	for _, j := range jobs {
		u := f.units.get(j.unit)
		u.mu.Lock()
		defer u.mu.Unlock()
	}
	outcomes := make([]unitOutcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { outcomes[i] = f.commitUnit(publishCtx, j.unit, j.leases, j.records) })
	}
	wg.Wait()
	cancelPublish()
	f.metrics.publishSeconds.Observe(time.Since(started).Seconds())

	var acked []record
	var settled []settlement
	var errs []error
	for i, o := range outcomes {
		acked = append(acked, o.acked...)
		settled = append(settled, o.settled...)
		if o.err != nil {
			errs = append(errs, fmt.Errorf("unit %d: %w", jobs[i].unit, o.err))
		}
	}
	if len(acked) == 0 && len(settled) == 0 {
		if len(errs) > 0 {
			return outcome{}, fmt.Errorf("exactly-once delivery: %v", errs)
		}
		return outcome{}, nil
	}
	var marks []unitMark
	for i, o := range outcomes {
		if o.checkpoint != nil {
			marks = append(marks, unitMark{unit: jobs[i].unit, name: f.unitName(jobs[i].unit), digest: checkpointDigest(o.checkpoint)})
		}
	}
	result, lost, err := f.acknowledgeUnits(ctx, worker, leases, acked, settled, marks)
	if err != nil {
		// The commits stand; their rows are cleaned up by the next opening of each unit.
		for i, o := range outcomes {
			if o.checkpoint != nil {
				f.closeUnit(jobs[i].unit)
			}
		}
		return outcome{}, err
	}
	lostUnits := map[int]bool{}
	for p := range lost {
		lostUnits[p%f.cfg.TransactionalUnits] = true
	}
	for i, o := range outcomes {
		switch u := jobs[i].unit; {
		case lostUnits[u]:
			f.closeUnit(u)
		case o.checkpoint != nil:
			f.units.get(u).cleaned = o.checkpoint
		}
	}
	if len(errs) > 0 {
		return result, fmt.Errorf("exactly-once delivery: %v", errs)
	}
	return result, nil
}

// errUnitLost: a unit's leases moved to another relay while this one opened it; nothing of the
// unit may be published.
var errUnitLost = errors.New("the leases of the transactional unit moved to another relay")

// openLeasedUnits closes the worker's units it no longer leases whole and opens, in parallel,
// those it leases whole that are not open. Failures are logged and returned (errUnitLost for a
// unit whose leases moved); the polling workers go on, and their next batch tries again.
func (f *Forwarder) openLeasedUnits(ctx context.Context, worker int, leases []lease) error {
	f.closeUnitsNotIn(worker, leases)
	openCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.LeaseTTL)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for n, ls := range f.wholeUnitLeases(leases) {
		u := f.units.get(n)
		u.mu.Lock()
		open := u.open
		u.mu.Unlock()
		if open {
			continue // the usual case, before every polling batch: no goroutine for it
		}
		wg.Go(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.open {
				return
			}
			lost, err := f.openUnit(openCtx, n, ls, u)
			if lost {
				err = fmt.Errorf("unit %s: %w", f.unitName(n), errUnitLost)
			}
			if err == nil {
				return
			}
			if ctx.Err() == nil {
				f.log.Warn("opening a transactional unit failed; it is opened again before its next transaction", "unit", f.unitName(n), "error", err)
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// wholeUnitLeases groups leases by unit, keeping the units leased whole.
func (f *Forwarder) wholeUnitLeases(leases []lease) map[int][]lease {
	byUnit := map[int][]lease{}
	for _, l := range leases {
		u := l.partition % f.cfg.TransactionalUnits
		byUnit[u] = append(byUnit[u], l)
	}
	for u, ls := range byUnit {
		if len(ls) != outbox.Partitions/f.cfg.TransactionalUnits {
			delete(byUnit, u)
		}
	}
	return byUnit
}

// closeUnit closes a unit: its next use opens it again, which recovers. The caller holds the
// unit's mu, or no batch can be using the unit: with polling, only the worker serving the unit
// uses it (closeUnitsNotIn runs in that worker); with the cdc source, closeAllUnits runs after
// the stream's workers and retry path have stopped.
func (f *Forwarder) closeUnit(unit int) {
	u := f.units.get(unit)
	if u.open {
		f.txp.CloseUnit(f.unitName(unit))
		u.open = false
	}
}

// closeUnitsNotIn closes the open units of the worker that it no longer leases whole.
func (f *Forwarder) closeUnitsNotIn(worker int, leases []lease) {
	owned := map[int]int{}
	for _, l := range leases {
		owned[l.partition%f.cfg.TransactionalUnits]++
	}
	perUnit := outbox.Partitions / f.cfg.TransactionalUnits
	f.units.mu.Lock()
	var stale []int
	for n, u := range f.units.units {
		if n%f.cfg.Workers == worker && u.open && owned[n] != perUnit {
			stale = append(stale, n)
		}
	}
	f.units.mu.Unlock()
	for _, p := range stale {
		f.closeUnit(p)
	}
}

// closeAllUnits closes every open unit (at shutdown, after the workers stopped).
func (f *Forwarder) closeAllUnits() {
	f.units.mu.Lock()
	var open []int
	for p, u := range f.units.units {
		if u.open {
			open = append(open, p)
		}
	}
	f.units.mu.Unlock()
	for _, p := range open {
		f.closeUnit(p)
	}
}

// openUnit opens a unit and finishes the cleanup of its last checkpoint, fenced by the leases
// of all its partitions. lost reports that one of them has moved meanwhile: the unit is closed
// again and nothing may be published. A checkpoint of another installation is refused
// (errForeignCheckpoint): the unit stays closed and its rows pending.
func (f *Forwarder) openUnit(ctx context.Context, n int, leases []lease, u *txUnit) (lost bool, err error) {
	unit := f.unitName(n)
	last, err := f.txp.OpenUnit(ctx, unit, f.cfg.CheckpointTopic, n)
	if err != nil {
		return false, fmt.Errorf("open transactional unit %s: %w", unit, err)
	}
	u.open = true
	f.metrics.unitsOpened.Inc()
	u.recovered = nil
	var cp checkpoint
	cleanup := last != nil && !bytes.Equal(last, u.cleaned)
	if cleanup {
		if cp, err = f.ownCheckpoint(unit, last, u); err != nil {
			f.closeUnit(n)
			return false, err
		}
	}
	// The leases are checked after the producer was initialized even when there is nothing to
	// clean up: a relay whose leases moved while it was stopped has just fenced the unit's
	// rightful owner in Kafka, and must not publish (the owner opens the unit again).
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	applied, mismatched := false, 0
	err = f.store.inLeaseTx(ackCtx, f.cfg.DB, func(tx *sql.Tx) error {
		owned, err := f.store.fence(ackCtx, tx, f.cfg.RelayID, leases)
		if err != nil || len(owned) != len(leases) {
			lost = err == nil
			return err
		}
		if err := f.store.ensureUnitRow(ackCtx, tx, unit); err != nil || !cleanup {
			return err
		}
		applied, mismatched, err = f.cleanUpCheckpoint(ackCtx, tx, unit, cp, last)
		return err
	})
	if err != nil || lost {
		f.closeUnit(n)
		if err != nil {
			return false, fmt.Errorf("check the leases of unit %s and clean up its last checkpoint: %w", unit, err)
		}
		return true, nil
	}
	if !cleanup {
		return false, nil
	}
	u.cleaned = last
	if !applied {
		return false, nil // acknowledged by the relay that committed it: its rows are settled
	}
	u.recovered = cp.rows()
	f.metrics.recoveredRows.Add(float64(len(cp.Rows) + len(cp.Dead)))
	f.log.Info("opened a transactional unit and finished the cleanup of its last transaction", "unit", unit,
		"published_rows", len(cp.Rows), "dead_rows", len(cp.Dead), "written_by", cp.Relay, "txn", cp.Txn)
	if mismatched > 0 {
		f.log.Warn("rows named by a unit's last checkpoint hold other events: left as they are", "unit", unit,
			"rows", mismatched, "written_by", cp.Relay, "txn", cp.Txn)
	}
	return false, nil
}

// errForeignCheckpoint: a unit's last checkpoint was written by another installation (two
// installations share a transactional-id prefix). Its rows are not this table's.
var errForeignCheckpoint = errors.New("the unit's last checkpoint was written by another installation")

// ownCheckpoint decodes a unit's last checkpoint and refuses it when another installation
// wrote it, loudly: counted, and logged at error (at most once a minute per unit).
func (f *Forwarder) ownCheckpoint(unit string, data []byte, u *txUnit) (checkpoint, error) {
	cp, err := decodeCheckpoint(unit, data)
	if err != nil || cp.Installation == "" || cp.Installation == f.installation {
		return cp, err // format 1 names no installation: applied as before (docs/exactly-once.md)
	}
	f.metrics.foreignCheckpoints.Inc()
	if time.Since(u.foreignLogged) > time.Minute {
		u.foreignLogged = time.Now()
		f.log.Error("refusing the last checkpoint of a transactional unit: another installation wrote it; "+
			"its events wait until the installations use different transactional_id_prefix values",
			"unit", unit, "checkpoint_installation", cp.Installation, "this_installation", f.installation,
			"written_by", cp.Relay, "txn", cp.Txn)
	}
	return cp, fmt.Errorf("unit %s: %w (%s; this installation is %s)", unit, errForeignCheckpoint, cp.Installation, f.installation)
}

// cleanUpCheckpoint applies a unit's last checkpoint in the opening's transaction, unless the
// units table says its rows were acknowledged already (then a replay done since is kept), and
// records that they now are.
func (f *Forwarder) cleanUpCheckpoint(ctx context.Context, tx *sql.Tx, unit string, cp checkpoint, data []byte) (applied bool, mismatched int, err error) {
	digest := checkpointDigest(data)
	cleaned, err := f.store.cleanedDigest(ctx, tx, unit)
	if err != nil || cleaned == digest {
		return false, 0, err
	}
	if mismatched, err = f.store.applyCheckpoint(ctx, tx, cp, f.cfg.Retention > 0); err != nil {
		return false, 0, err
	}
	return true, mismatched, f.store.markCleaned(ctx, tx, []unitMark{{name: unit, digest: digest}})
}

// pendingDead is a record to dead-letter in the next transaction.
type pendingDead struct {
	record   record
	attempts int
	reason   string
	slim     bool // the dead letter goes without its payload (the broker refused it whole)
}

// commitUnit publishes one unit's records, in order, in transactions of the unit. A failed
// event parks its key as on the at-least-once path: the transaction is aborted, the key's
// records are dropped from it, and the rest are committed in the next round.
func (f *Forwarder) commitUnit(ctx context.Context, n int, leases []lease, records []record) unitOutcome {
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
			pending = slices.DeleteFunc(pending, func(r record) bool { return u.recovered[r.seq] })
			dead = slices.DeleteFunc(dead, func(d pendingDead) bool { return u.recovered[d.record.seq] })
			out.settled = slices.DeleteFunc(out.settled, func(st settlement) bool { return u.recovered[st.record.seq] })
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
			f.metrics.txCommitted.Inc()
			out.acked, out.checkpoint = pending, cp
			for _, d := range dead {
				f.metrics.deadLettered.WithLabelValues(d.record.event.Topic, d.record.event.TenantID).Inc()
				out.settled = append(out.settled, settlement{record: d.record, attempts: d.attempts, next: time.Now(), dead: true, reason: d.reason})
			}
			return out
		}
		f.metrics.txAborted.Inc()
		u.open = false // CommitUnit closed the session
		failedAny := false
		for _, e := range errs {
			failedAny = failedAny || e != nil
		}
		if !failedAny || round == maxTransactionRounds {
			// Nothing known failed on its own (a commit of unknown outcome, fencing): the rows stay
			// pending; opening the unit again finds out whether the transaction committed.
			for _, d := range dead {
				out.settled = append(out.settled, f.retryLater(d.record, d.attempts, d.reason))
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
func (f *Forwarder) afterAbort(pending []record, dead []pendingDead, errs []error, settled []settlement) ([]record, []pendingDead, []settlement) {
	blocked := map[int64]bool{}
	var next []record
	var nextDead []pendingDead
	for i, r := range pending {
		switch {
		case blocked[r.keyHash]:
		case errs[i] != nil:
			blocked[r.keyHash] = true
			attempts := r.attempts + 1
			reason := errs[i].Error()
			f.metrics.failed.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
			if !f.cfg.IsRetriable(errs[i]) || (!f.cfg.UnlimitedRetries && attempts >= f.cfg.MaxAttempts) {
				// An event past its retry budget has had a dead letter refused before (the
				// transactions of a batch are too few to try both forms each time), or retried
				// without limit: its dead letter goes reduced from the start, so that one refused
				// even reduced ends dead (afterDeadLetterAbort) instead of looping.
				reduced := attempts > f.cfg.MaxAttempts
				nextDead = append(nextDead, pendingDead{record: r, attempts: attempts, reason: reason, slim: reduced})
				continue
			}
			settled = append(settled, f.retryLater(r, attempts, reason))
		default:
			next = append(next, r)
		}
	}
	for j, d := range dead {
		var st *settlement
		nextDead, st = f.afterDeadLetterAbort(d, errs[len(pending)+j], nextDead)
		if st != nil {
			settled = append(settled, *st)
		}
	}
	return next, nextDead, settled
}

// afterDeadLetterAbort sorts one dead letter of an aborted transaction: kept for the next
// transaction when it did not fail itself; when the broker refused it (a permanent error, or any
// error on its last chance, lastDeadLetterChance), sent reduced to the ids and the reason in the
// next one, and, if it was reduced already, settled dead in the table without a dead letter
// (deadLetterRefused); otherwise retried later.
func (f *Forwarder) afterDeadLetterAbort(d pendingDead, err error, nextDead []pendingDead) ([]pendingDead, *settlement) {
	if err == nil {
		return append(nextDead, d), nil
	}
	if !f.cfg.IsRetriable(err) || f.lastDeadLetterChance(d.attempts) {
		if !d.slim {
			d.slim = true
			return append(nextDead, d), nil
		}
		st := f.deadLetterRefused(d.record, d.attempts, d.reason, err)
		return nextDead, &st
	}
	st := f.retryLater(d.record, d.attempts, fmt.Sprintf("%s (dead-lettering to %s failed: %v)", d.reason, f.cfg.DeadLetterTopic, err))
	return nextDead, &st
}

// transactionMessages are the messages of one transaction: the records' events, then the dead
// letters (whole, or reduced when d.slim; see deadLetterMessage).
func (f *Forwarder) transactionMessages(ctx context.Context, pending []record, dead []pendingDead) ([]string, []*message.Message) {
	topics := make([]string, 0, len(pending)+len(dead))
	msgs := toMessages(ctx, pending)
	for _, r := range pending {
		topics = append(topics, r.event.Topic)
	}
	for _, d := range dead {
		topics = append(topics, f.cfg.DeadLetterTopic)
		msgs = append(msgs, f.deadLetterMessage(ctx, d.record, d.reason, d.attempts, d.slim))
	}
	return topics, msgs
}

// checkpointOf encodes the checkpoint of a transaction holding pending and dead.
func (f *Forwarder) checkpointOf(unit string, pending []record, dead []pendingDead) ([]byte, error) {
	cp := checkpoint{Version: checkpointVersion, Installation: f.installation, Unit: unit, Relay: f.cfg.RelayID,
		Txn: f.units.txn.Add(1), Time: time.Now().UTC(), Rows: make([]rowRef, len(pending))}
	for i, r := range pending {
		cp.Rows[i] = rowRef{Seq: r.seq, EventID: r.event.ID.String()}
	}
	for _, d := range dead {
		cp.Dead = append(cp.Dead, deadRow{Seq: d.record.seq, EventID: d.record.event.ID.String(),
			Attempts: d.attempts, Reason: truncateUTF8(d.reason, 1024)})
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint of unit %s: %w", unit, err)
	}
	return data, nil
}
