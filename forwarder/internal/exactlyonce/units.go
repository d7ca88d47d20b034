package exactlyonce

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The transactional units of exactly-once delivery: their state, their opening (which fences
// the unit's earlier sessions and finishes the cleanup of its last checkpoint) and closing.

// txUnits are the transactional units of a deliverer, by unit number.
type txUnits struct {
	mu    sync.Mutex
	units map[int]*txUnit
	txn   atomic.Int64 // numbers the checkpoints this relay writes
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
	// foreign is set while the unit's last checkpoint is another installation's (refused at
	// foreignAt): its rows are not claimed (Ready), and it is opened again, which
	// fences the other installation's producer, at most every foreignRetry.
	foreign   bool
	foreignAt time.Time
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

// errUnitLost: a unit's leases moved to another relay while this one opened it; nothing of the
// unit may be published.
var errUnitLost = errors.New("the leases of the transactional unit moved to another relay")

// openLeasedUnits closes the worker's units it no longer leases whole and opens, in parallel,
// those it leases whole that are not open. Failures are logged and returned (errUnitLost for a
// unit whose leases moved); the polling workers go on, and their next batch tries again.
func (d *Deliverer) openLeasedUnits(ctx context.Context, worker int, leases []relay.Lease) error {
	d.closeUnitsNotIn(worker, leases)
	openCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.core.LeaseTTL)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for n, ls := range d.wholeUnitLeases(leases) {
		u := d.txUnits.get(n)
		u.mu.Lock()
		skip := u.open || (u.foreign && time.Since(u.foreignAt) < foreignRetry)
		u.mu.Unlock()
		if skip {
			continue // open: the usual case, before every polling batch, with no goroutine for it
		}
		wg.Go(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.open {
				return
			}
			lost, err := d.openUnit(openCtx, n, ls, u)
			if lost {
				err = fmt.Errorf("unit %s: %w", d.unitName(n), errUnitLost)
			}
			if err == nil {
				return
			}
			if ctx.Err() == nil {
				d.core.Log.Warn("opening a transactional unit failed; it is opened again before its next transaction", "unit", d.unitName(n), "error", err)
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
func (d *Deliverer) wholeUnitLeases(leases []relay.Lease) map[int][]relay.Lease {
	byUnit := map[int][]relay.Lease{}
	for _, l := range leases {
		u := l.Partition % d.units
		byUnit[u] = append(byUnit[u], l)
	}
	for u, ls := range byUnit {
		if len(ls) != outbox.Partitions/d.units {
			delete(byUnit, u)
		}
	}
	return byUnit
}

// closeUnit closes a unit: its next use opens it again, which recovers. The caller holds the
// unit's mu, or no batch can be using the unit: with polling, only the worker serving the unit
// uses it (closeUnitsNotIn runs in that worker); with the cdc source, closeAllUnits runs after
// the stream's workers and retry path have stopped.
func (d *Deliverer) closeUnit(unit int) {
	u := d.txUnits.get(unit)
	if u.open {
		d.txp.CloseUnit(d.unitName(unit))
		u.open = false
	}
}

// closeUnitsNotIn closes the open units of the worker that it no longer leases whole.
func (d *Deliverer) closeUnitsNotIn(worker int, leases []relay.Lease) {
	owned := map[int]int{}
	for _, l := range leases {
		owned[l.Partition%d.units]++
	}
	perUnit := outbox.Partitions / d.units
	d.txUnits.mu.Lock()
	var stale []int
	for n, u := range d.txUnits.units {
		if n%d.core.Workers == worker && u.open && owned[n] != perUnit {
			stale = append(stale, n)
		}
	}
	d.txUnits.mu.Unlock()
	for _, p := range stale {
		d.closeUnit(p)
	}
}

// closeAllUnits closes every open unit (at shutdown, after the workers stopped).
func (d *Deliverer) closeAllUnits() {
	d.txUnits.mu.Lock()
	var open []int
	for p, u := range d.txUnits.units {
		if u.open {
			open = append(open, p)
		}
	}
	d.txUnits.mu.Unlock()
	for _, p := range open {
		d.closeUnit(p)
	}
}

// openUnit opens a unit and finishes the cleanup of its last checkpoint, fenced by the leases
// of all its partitions. lost reports that one of them has moved meanwhile: the unit is closed
// again and nothing may be published. A checkpoint of another installation is refused
// (errForeignCheckpoint): the unit stays closed and its rows pending.
func (d *Deliverer) openUnit(ctx context.Context, n int, leases []relay.Lease, u *txUnit) (lost bool, err error) {
	unit := d.unitName(n)
	last, err := d.txp.OpenUnit(ctx, unit, d.checkpointTopic, n)
	if err != nil {
		return false, fmt.Errorf("open transactional unit %s: %w", unit, err)
	}
	u.open = true
	d.core.Metrics.UnitsOpened.Inc()
	u.recovered = nil
	var cp bookkeeping.Checkpoint
	cleanup := last != nil && !bytes.Equal(last, u.cleaned)
	if cleanup {
		if cp, err = d.ownCheckpoint(unit, last, u); err != nil {
			d.closeUnit(n)
			return false, err
		}
	}
	// The leases are checked after the producer was initialized even when there is nothing to
	// clean up: a relay whose leases moved while it was stopped has just fenced the unit's
	// rightful owner in Kafka, and must not publish (the owner opens the unit again).
	lost, recovered, mismatched, err := d.fence(ctx, unit, leases, u, cleanup, cp, last)
	if err != nil || lost {
		d.closeUnit(n)
		if errors.Is(err, ErrUnitCountMismatch) {
			d.halt(err) // every later opening would be refused too
		}
		if err != nil {
			return false, fmt.Errorf("check the leases of unit %s and clean up its last checkpoint: %w", unit, err)
		}
		return true, nil
	}
	u.foreign = false
	if !cleanup {
		return false, nil
	}
	u.cleaned = last
	if recovered == nil {
		return false, nil // acknowledged by the relay that committed it: its rows are settled
	}
	u.recovered = recovered
	d.core.Metrics.RecoveredRows.Add(float64(len(recovered)))
	d.core.Log.Info("opened a transactional unit and finished the cleanup of its last transaction", "unit", unit,
		"published_rows", len(cp.Rows), "dead_rows", len(cp.Dead), "written_by", cp.Relay, "txn", cp.Txn)
	if mismatched > 0 {
		d.core.Log.Warn("rows named by a unit's last checkpoint hold other events: left as they are", "unit", unit,
			"rows", mismatched, "written_by", cp.Relay, "txn", cp.Txn)
	}
	return false, nil
}

// opening is the database side of a unit's opening: in one transaction fenced by the leases of
// all the unit's partitions (lost when one has moved), it records the unit, checks the unit
// count and, when cleanup, applies the unit's last checkpoint cp (cleanUpCheckpoint, whose
// results it returns).
type opening func(ctx context.Context, unit string, leases []relay.Lease, u *txUnit, cleanup bool, cp bookkeeping.Checkpoint,
	last []byte) (lost bool, recovered map[int64]bool, mismatched int, err error)

// fencedOpening is the opening on the relay's store.
func (d *Deliverer) fencedOpening(ctx context.Context, unit string, leases []relay.Lease, u *txUnit, cleanup bool, cp bookkeeping.Checkpoint,
	last []byte) (lost bool, recovered map[int64]bool, mismatched int, err error) {
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relay.AckTimeout)
	defer cancel()
	err = d.core.Store.InLeaseTx(ackCtx, d.core.DB, func(tx *sql.Tx) error {
		owned, err := d.core.Store.Fence(ackCtx, tx, d.core.RelayID, leases)
		if err != nil || len(owned) != len(leases) {
			lost = err == nil
			return err
		}
		if err := d.core.Store.EnsureUnitRow(ackCtx, tx, unit); err != nil {
			return err
		}
		if err := d.checkUnitCount(ackCtx, tx); err != nil || !cleanup {
			return err
		}
		recovered, mismatched, err = d.cleanUpCheckpoint(ackCtx, tx, unit, u, cp, last)
		return err
	})
	return lost, recovered, mismatched, err
}

// foreignRetry is how often a unit whose last checkpoint is another installation's is opened
// again to see whether that changed.
const foreignRetry = 30 * time.Second

// errForeignCheckpoint: a unit's last checkpoint was written by another installation (two
// installations share a transactional-id prefix). Its rows are not this table's.
var errForeignCheckpoint = errors.New("the unit's last checkpoint was written by another installation")

// ownCheckpoint decodes a unit's last checkpoint and refuses it when another installation
// wrote it (refuseForeign).
func (d *Deliverer) ownCheckpoint(unit string, data []byte, u *txUnit) (bookkeeping.Checkpoint, error) {
	cp, err := bookkeeping.DecodeCheckpoint(unit, data)
	if err != nil || cp.Installation == "" || cp.Installation == d.installation {
		return cp, err // format 1 names no installation: see cleanUpCheckpoint
	}
	return cp, d.refuseForeign(unit, u, cp, cp.Installation)
}

// refuseForeign refuses a unit's last checkpoint written by another installation, loudly:
// counted, and logged at error level (at most once a minute per unit). Its events wait.
func (d *Deliverer) refuseForeign(unit string, u *txUnit, cp bookkeeping.Checkpoint, installation string) error {
	d.core.Metrics.ForeignCheckpoints.Inc()
	u.foreign, u.foreignAt = true, time.Now()
	if time.Since(u.foreignLogged) > time.Minute {
		u.foreignLogged = time.Now()
		d.core.Log.Error("refusing the last checkpoint of a transactional unit: another installation wrote it; "+
			"its events wait until the installations use different transactional_id_prefix values",
			"unit", unit, "checkpoint_installation", installation, "this_installation", d.installation,
			"written_by", cp.Relay, "txn", cp.Txn)
	}
	return fmt.Errorf("unit %s: %w (%s; this installation is %s)", unit, errForeignCheckpoint, installation, d.installation)
}

// cleanUpCheckpoint applies a unit's last checkpoint in the opening's transaction, unless the
// units table says its rows were acknowledged already (then a replay done since is kept), and
// records that they now are. When the acknowledgement settled the rows of some of the unit's
// partitions only, it applies the checkpoint to the others. It returns the checkpoint's rows it
// settled or found settled (nil when none: the relay that committed it acknowledged them all),
// which no batch may send or settle again.
func (d *Deliverer) cleanUpCheckpoint(ctx context.Context, tx *sql.Tx, unit string, u *txUnit, cp bookkeeping.Checkpoint,
	data []byte) (recovered map[int64]bool, mismatched int, err error) {
	digest := relay.CheckpointDigest(data)
	cleaned, err := d.core.Store.CleanedDigest(ctx, tx, unit)
	if err != nil {
		return nil, 0, err
	}
	cleanedDigest, settled := relay.ParseCleanupMark(cleaned)
	if cleanedDigest != digest {
		settled = 0 // a mark of an earlier checkpoint: none of this one's rows is settled
	} else if settled == 0 {
		return nil, 0, nil
	}
	if cp.Installation == "" && cleaned != "" {
		// Format 1 names no installation. It is this installation's only if written before its
		// relays were upgraded, that is, before they cleaned a checkpoint of their own on this
		// unit; after that, it is another installation's, of an older version, sharing the prefix.
		return nil, 0, d.refuseForeign(unit, u, cp, "(an older version's, format 1)")
	}
	kept, mismatched, err := d.core.Store.ApplyCheckpoint(ctx, tx, cp, d.core.Retention > 0, settled)
	if err != nil {
		return nil, 0, err
	}
	recovered = cp.Seqs()
	for seq := range kept {
		delete(recovered, seq) // settled by the acknowledgement, and possibly replayed since
	}
	return recovered, mismatched, d.core.Store.MarkCleaned(ctx, tx, []relay.UnitMark{{Name: unit, Digest: digest}})
}
