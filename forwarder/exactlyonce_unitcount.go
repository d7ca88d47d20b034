package forwarder

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// The unit count of a lease group must not change (bookkeeping.UnitCount says why and where it
// is recorded).

// ErrUnitCountMismatch is the error of an exactly-once relay configured with a unit count other
// than the one its lease group runs with.
var ErrUnitCountMismatch = errors.New("the transactional unit count differs from the lease group's")

// resolveUnits settles the unit count before the first lease is taken, recording it for the
// group if none is. A group that recorded a count keeps it when TransactionalUnits is unset (so a
// relay whose default changed does not regroup the partitions); a configured count that differs
// is refused.
func (f *Forwarder) resolveUnits(ctx context.Context) error {
	prefix := f.cfg.TransactionalIDPrefix
	count, err := f.store.UnitCount(ctx, f.cfg.DB, prefix)
	if err != nil {
		return err
	}
	if count == 0 {
		proposed, err := f.store.RecordedUnits(ctx, f.cfg.DB, prefix)
		if err != nil {
			return err
		}
		if proposed == 0 || !f.unitsConfigured {
			proposed = cmp.Or(proposed, f.cfg.TransactionalUnits)
		}
		if err := f.store.RecordUnitCount(ctx, f.cfg.DB, prefix, proposed); err != nil {
			return err
		}
		if count, err = f.store.UnitCount(ctx, f.cfg.DB, prefix); err != nil {
			return err
		}
	}
	switch {
	case count == f.cfg.TransactionalUnits:
		return nil
	case !f.unitsConfigured && count%f.cfg.Workers == 0:
		f.setUnits(count)
		return nil
	case !f.unitsConfigured:
		return fmt.Errorf("lease group %q runs with %d transactional units (%s in %s), not a multiple of Workers %d: "+
			"set Workers (forwarder.workers) to a divisor of %d: %w", f.cfg.LeaseGroup, count, bookkeeping.UnitCountRow(prefix), f.store.Table.Units(), f.cfg.Workers, count, ErrUnitCountMismatch)
	default:
		return f.unitCountMismatch(count)
	}
}

// checkUnitCount refuses, in the fenced transaction of a unit's opening, a unit count other
// than the one the units table records: a guard against a count changed in the table while the
// relay ran.
func (f *Forwarder) checkUnitCount(ctx context.Context, q relay.Querier) error {
	count, err := f.store.UnitCount(ctx, q, f.cfg.TransactionalIDPrefix)
	if err != nil || count == f.cfg.TransactionalUnits {
		return err
	}
	return f.unitCountMismatch(count)
}

func (f *Forwarder) unitCountMismatch(recorded int) error {
	return fmt.Errorf("TransactionalUnits (forwarder.transactional_units) is %d, but lease group %q runs with %d units "+
		"(%s in %s): leave it unset or set it to %d; to change the count see docs/exactly-once.md: %w",
		f.cfg.TransactionalUnits, f.cfg.LeaseGroup, recorded, bookkeeping.UnitCountRow(f.cfg.TransactionalIDPrefix), f.store.Table.Units(), recorded, ErrUnitCountMismatch)
}

// setUnits makes n the unit count, before any lease is taken.
func (f *Forwarder) setUnits(n int) {
	f.cfg.TransactionalUnits = n
	f.leases.SetShare(sharePolicy(f))
}
