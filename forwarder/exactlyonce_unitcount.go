package forwarder

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxkit/outboxkit/outbox"
)

// The unit count of a lease group must not change while any of its rows is pending: relays that
// grouped the partitions differently would not read the last checkpoint of every unit that
// published those rows, and would publish some of them again. The units table records the count:
// a unit's row is created when the unit is first opened, before it publishes anything, so the
// units of the group that ever published are the rows named "<prefix>/uNN".

// minDefaultUnits is the fewest transactional units a lease group gets by default: fewer units
// make fewer, larger transactions, each with a fixed cost at the broker (docs/exactly-once.md).
const minDefaultUnits = 2

// defaultUnits is the TransactionalUnits of a lease group whose units table records none.
func defaultUnits(workers int) int { return max(minDefaultUnits, workers) }

// resolveUnits settles the unit count before the first lease is taken. A group that recorded a
// count keeps it when the configuration leaves TransactionalUnits unset (so a relay whose
// default changed does not regroup the partitions). A configured count that differs from the
// recorded one is refused while rows are pending; with none pending, it replaces the recorded
// one.
func (f *Forwarder) resolveUnits(ctx context.Context) error {
	recorded, names, err := f.store.recordedUnits(ctx, f.cfg.DB, f.cfg.TransactionalIDPrefix)
	if err != nil {
		return err
	}
	configured := f.cfg.TransactionalUnits
	switch {
	case recorded == 0 || recorded == configured:
		return nil
	case !f.unitsConfigured:
		if outbox.Partitions%recorded != 0 || recorded%f.cfg.Workers != 0 {
			return fmt.Errorf("forwarder: lease group %q runs with %d transactional units (rows of %s), which do not divide the %d partitions "+
				"or are not a multiple of Workers %d", f.cfg.LeaseGroup, recorded, f.store.table.Units(), outbox.Partitions, f.cfg.Workers)
		}
		f.setUnits(recorded)
		return nil
	}
	pending, err := f.pendingRows(ctx)
	if err != nil {
		return err
	}
	if pending > 0 {
		return fmt.Errorf("forwarder: TransactionalUnits %d, but lease group %q runs with %d units (rows of %s) and %d rows are pending: "+
			"leave TransactionalUnits unset or set it to %d, or stop every relay of the group, let one relay with %d units "+
			"publish every pending row, then start the relays with %d (docs/exactly-once.md)",
			configured, f.cfg.LeaseGroup, recorded, f.store.table.Units(), pending, recorded, recorded, configured)
	}
	stale := slices.DeleteFunc(names, func(name string) bool { n, _ := unitIndex(name, f.cfg.TransactionalIDPrefix); return n < configured })
	if err := f.store.forgetUnits(ctx, f.cfg.DB, stale); err != nil {
		return err
	}
	f.log.Info("transactional unit count changed (no row was pending)", "lease_group", f.cfg.LeaseGroup, "from", recorded, "to", configured)
	return nil
}

// setUnits makes n the unit count, before any lease is taken.
func (f *Forwarder) setUnits(n int) {
	f.cfg.TransactionalUnits = n
	f.share.units = n
}

// pendingRows counts the rows waiting to be published in the relay's scope.
func (f *Forwarder) pendingRows(ctx context.Context) (int64, error) {
	stats, err := f.store.stats(ctx, f.cfg.DB)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, st := range stats {
		n += st.pending
	}
	return n, nil
}

// unitIndex parses NN out of a unit name "<prefix>/uNN"; ok is false for another prefix.
func unitIndex(name, prefix string) (n int, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+"/u")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
