package forwarder

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
)

// The names the cdc source makes in the database cluster. Replication slots are per cluster and
// publications per database, so their names carry the table's installation identity
// (outbox.Table.Slot, outbox.Table.Publication): two outboxes with the same table name, in two
// schemas or two databases of one cluster, never share a slot or a publication. (When they did,
// each one's streamer took the other's slot over and the stream carried the other's rows: events
// stayed pending.)

// start names the slot and the publication from the table's installation and binds the metrics
// to the slot. (Each session retires the names an earlier version made: ensureSlot.)
func (s cdcSource) Start(ctx context.Context) error {
	f := s.f
	id, err := f.store.InstallationID(ctx, f.cfg.DB)
	if err != nil {
		return err
	}
	slot, err := f.cdc.table.Slot(id, f.cfg.LeaseGroup)
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	pub, err := f.cdc.table.Publication(id)
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	f.cdc.slot, f.cdc.publication = slot, pub
	if f.cdc.metrics == nil {
		f.cdc.metrics = f.cdc.vecs.forSlot(slot)
	}
	return nil
}

// retireLegacyCDCNames drops the slot of the lease group named as before installations existed,
// if this table's slot table recorded it and it is a slot of this database (so it is this
// outbox's, not another's with the same table name) and no relay streams it: left alone, it would
// pin WAL forever. The new slot is created, and the table drained, as for a lost slot. The table
// is taken out of the old publication, which is dropped once it covers no table. The slot table
// forgets the old slot last, so that a step that failed is tried again at the next session.
func (f *Forwarder) retireLegacyCDCNames(ctx context.Context) error {
	legacy, err := f.cdc.table.Slot("", f.cfg.LeaseGroup)
	if err != nil {
		return err
	}
	var ours bool
	if err := f.store.SQL().CDC().SlotRecorded(legacy).QueryRow(ctx, f.cfg.DB).Scan(&ours); err != nil {
		return fmt.Errorf("cdc: read the slot table: %w", err)
	}
	if !ours {
		return nil
	}
	elsewhere, err := pgrepl.SlotOfOtherDatabase(ctx, f.cfg.DB, legacy)
	if err != nil {
		return err
	}
	if elsewhere {
		return nil // another database's outbox of the same table name (in an older version)
	}
	st, err := pgrepl.ReadSlot(ctx, f.cfg.DB, legacy)
	if err != nil {
		return err
	}
	if st.ActivePID != 0 {
		f.log.Warn("cdc: a relay of an earlier version streams this table's slot of before installations; stop it",
			"legacy_slot", legacy, "pid", st.ActivePID, "slot", f.cdc.slot)
		return nil
	}
	if st.Exists {
		if err := pgrepl.DropSlot(ctx, f.cfg.DB, legacy); err != nil {
			return err
		}
		f.log.Warn("cdc: dropped this table's replication slot of an earlier version (named without the installation); "+
			"the new slot is created and the table drained", "legacy_slot", legacy, "slot", f.cdc.slot)
	}
	if err := f.retireLegacyPublication(ctx); err != nil {
		return err
	}
	if _, err := f.store.SQL().CDC().ForgetSlot(legacy).Exec(ctx, f.cfg.DB); err != nil {
		return fmt.Errorf("cdc: forget slot %s: %w", legacy, err)
	}
	return nil
}

// retireLegacyPublication takes the table out of the publication named before installations
// existed, and drops that publication once it covers no table.
func (f *Forwarder) retireLegacyPublication(ctx context.Context) error {
	pub, err := f.cdc.table.Publication("")
	if err != nil {
		return err
	}
	target, err := pgrepl.ResolveTable(ctx, f.cfg.DB, f.cdc.table.Events())
	if err != nil {
		return err
	}
	c, err := pgrepl.ReadPublication(ctx, f.cfg.DB, pub, target)
	if err != nil || !c.Exists {
		return err
	}
	if c.Covers {
		if err := pgrepl.DropTable(ctx, f.cfg.DB, pub, f.cdc.table.Events()); err != nil {
			return fmt.Errorf("cdc: take table %s out of publication %s: %w", target, pub, err)
		}
	}
	tables, err := pgrepl.PublicationTables(ctx, f.cfg.DB, pub)
	if err != nil || tables > 0 {
		return err
	}
	return pgrepl.DropPublication(ctx, f.cfg.DB, pub)
}
