package exactlyonce

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// The units' names and count, settled at start: the names from the table's installation
// identity (unless the configuration names a prefix), the count from the lease group's record,
// which must not change (bookkeeping.UnitCount says why and where it is recorded).

// ErrUnitCountMismatch is the error of an exactly-once relay configured with a unit count other
// than the one its lease group runs with (forwarder.ErrUnitCountMismatch).
var ErrUnitCountMismatch = errors.New("the transactional unit count differs from the lease group's")

// unitName is the name of a transactional unit (its Kafka transactional.id): the prefix and the
// unit number.
func (d *Deliverer) unitName(unit int) string {
	return bookkeeping.UnitName(d.prefix, unit)
}

// maxUnitName bounds a transactional unit's name: the key of the units table.
const maxUnitName = 191

// resolveInstallation reads the table's installation identity and, unless the configuration
// names one, derives the units' prefix from it.
func (d *Deliverer) resolveInstallation(ctx context.Context) error {
	id, err := d.core.Store.InstallationID(ctx, d.core.DB)
	if err != nil {
		return err
	}
	d.installation = id
	if d.prefix == "" {
		d.prefix = bookkeeping.DefaultTransactionalIDPrefix(id, d.core.Store.Table.Events(), d.leaseGroup)
	}
	// The units table keys its rows by unit name (VARCHAR(191) on MySQL, which would cut a longer
	// one, and the cleanup marks would then never match).
	if name := d.unitName(d.units - 1); len(name) > maxUnitName {
		return fmt.Errorf("forwarder: transactional unit name %q is %d bytes, over the limit of %d: "+
			"set a shorter TransactionalIDPrefix (transactional_id_prefix) or lease group", name, len(name), maxUnitName)
	}
	return nil
}

// resolveUnits settles the unit count before the first lease is taken, recording it for the
// group if none is. A group that recorded a count keeps it when the count is not configured (so
// a relay whose default changed does not regroup the partitions); a configured count that
// differs is refused.
func (d *Deliverer) resolveUnits(ctx context.Context) error {
	store, db := d.core.Store, d.core.DB
	count, err := store.UnitCount(ctx, db, d.prefix)
	if err != nil {
		return err
	}
	if count == 0 {
		proposed, err := store.RecordedUnits(ctx, db, d.prefix)
		if err != nil {
			return err
		}
		if proposed == 0 || !d.unitsConfigured {
			proposed = cmp.Or(proposed, d.units)
		}
		if err := store.RecordUnitCount(ctx, db, d.prefix, proposed); err != nil {
			return err
		}
		if count, err = store.UnitCount(ctx, db, d.prefix); err != nil {
			return err
		}
	}
	switch {
	case count == d.units:
		return nil
	case !d.unitsConfigured && count%d.core.Workers == 0:
		d.setUnits(count)
		return nil
	case !d.unitsConfigured:
		return fmt.Errorf("lease group %q runs with %d transactional units (%s in %s), not a multiple of Workers %d: "+
			"set Workers (forwarder.workers) to a divisor of %d: %w", d.leaseGroup, count, bookkeeping.UnitCountRow(d.prefix), store.Table.Units(), d.core.Workers, count, ErrUnitCountMismatch)
	default:
		return d.unitCountMismatch(count)
	}
}

// checkUnitCount refuses, in the fenced transaction of a unit's opening, a unit count other
// than the one the units table records: a guard against a count changed in the table while the
// relay ran.
func (d *Deliverer) checkUnitCount(ctx context.Context, q relay.Querier) error {
	count, err := d.core.Store.UnitCount(ctx, q, d.prefix)
	if err != nil || count == d.units {
		return err
	}
	return d.unitCountMismatch(count)
}

func (d *Deliverer) unitCountMismatch(recorded int) error {
	return fmt.Errorf("TransactionalUnits (forwarder.transactional_units) is %d, but lease group %q runs with %d units "+
		"(%s in %s): leave it unset or set it to %d; to change the count see docs/exactly-once.md: %w",
		d.units, d.leaseGroup, recorded, bookkeeping.UnitCountRow(d.prefix), d.core.Store.Table.Units(), recorded, ErrUnitCountMismatch)
}

// setUnits makes n the unit count, before any lease is taken.
func (d *Deliverer) setUnits(n int) {
	d.units = n
	d.unitsSettled(n)
}
