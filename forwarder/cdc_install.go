package forwarder

import (
	"context"
	"fmt"
)

// The names the cdc source makes in the database cluster. Replication slots are per cluster and
// publications per database, so their names carry the table's installation identity
// (outbox.Table.Slot, outbox.Table.Publication): two outboxes with the same table name, in two
// schemas or two databases of one cluster, never share a slot or a publication. (When they did,
// each one's streamer took the other's slot over and the stream carried the other's rows: events
// stayed pending.)

// start names the slot and the publication from the table's installation and binds the metrics
// to the slot. (Each session retires the names an earlier version made: ensureSlot.)
func (s cdcSource) start(ctx context.Context) error {
	f := s.f
	id, err := f.store.installationID(ctx, f.cfg.DB)
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
	if err := f.store.sql().CDC().SlotRecorded(legacy).QueryRow(ctx, f.cfg.DB).Scan(&ours); err != nil {
		return fmt.Errorf("cdc: read the slot table: %w", err)
	}
	if !ours {
		return nil
	}
	var elsewhere bool
	if err := f.cfg.DB.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1"+
		" AND database IS DISTINCT FROM current_database())", legacy).Scan(&elsewhere); err != nil {
		return fmt.Errorf("cdc: read slot %s: %w", legacy, err)
	}
	if elsewhere {
		return nil // another database's outbox of the same table name (in an older version)
	}
	st, err := readSlot(ctx, f.cfg.DB, legacy)
	if err != nil {
		return err
	}
	if st.activePID != 0 {
		f.log.Warn("cdc: a relay of an earlier version streams this table's slot of before installations; stop it",
			"legacy_slot", legacy, "pid", st.activePID, "slot", f.cdc.slot)
		return nil
	}
	if st.exists {
		if err := dropSlot(ctx, f.cfg.DB, legacy); err != nil {
			return err
		}
		f.log.Warn("cdc: dropped this table's replication slot of an earlier version (named without the installation); "+
			"the new slot is created and the table drained", "legacy_slot", legacy, "slot", f.cdc.slot)
	}
	if err := f.retireLegacyPublication(ctx); err != nil {
		return err
	}
	if _, err := f.store.sql().CDC().ForgetSlot(legacy).Exec(ctx, f.cfg.DB); err != nil {
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
	target, err := resolveTable(ctx, f.cfg.DB, f.cdc.table)
	if err != nil {
		return err
	}
	c, err := readPublication(ctx, f.cfg.DB, pub, target)
	if err != nil || !c.exists {
		return err
	}
	if c.covers {
		if _, err := f.cfg.DB.ExecContext(ctx, "ALTER PUBLICATION "+pub+" DROP TABLE "+f.cdc.table.Events()); err != nil {
			return fmt.Errorf("cdc: take table %s out of publication %s: %w", target, pub, err)
		}
	}
	var tables int
	if err := f.cfg.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_publication_tables WHERE pubname = $1", pub).Scan(&tables); err != nil {
		return fmt.Errorf("cdc: read publication %s: %w", pub, err)
	}
	if tables == 0 {
		if _, err := f.cfg.DB.ExecContext(ctx, "DROP PUBLICATION IF EXISTS "+pub); err != nil {
			return fmt.Errorf("cdc: drop publication %s: %w", pub, err)
		}
	}
	return nil
}
