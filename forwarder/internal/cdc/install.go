package cdc

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

// Start names the slot and the publication from the table's installation and binds the metrics
// to the slot. (Each session retires the names an earlier version made: ensureSlot.)
func (s *Source) Start(ctx context.Context) error {
	id, err := s.core.Store.InstallationID(ctx, s.core.DB)
	if err != nil {
		return err
	}
	slot, err := s.core.Store.Table.Slot(id, s.core.Store.Group)
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	pub, err := s.core.Store.Table.Publication(id)
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	s.slot, s.publication = slot, pub
	if s.metrics == nil {
		s.metrics = s.vecs.forSlot(slot)
	}
	return nil
}

// retireLegacyNames drops the slot of the lease group named as before installations existed,
// if this table's slot table recorded it and it is a slot of this database (so it is this
// outbox's, not another's with the same table name) and no relay streams it: left alone, it would
// pin WAL forever. The new slot is created, and the table drained, as for a lost slot. The table
// is taken out of the old publication, which is dropped once it covers no table. The slot table
// forgets the old slot last, so that a step that failed is tried again at the next session.
func (s *Source) retireLegacyNames(ctx context.Context) error {
	legacy, err := s.core.Store.Table.Slot("", s.core.Store.Group)
	if err != nil {
		return err
	}
	var ours bool
	if err := s.core.Store.SQL().CDC().SlotRecorded(legacy).QueryRow(ctx, s.core.DB).Scan(&ours); err != nil {
		return fmt.Errorf("cdc: read the slot table: %w", err)
	}
	if !ours {
		return nil
	}
	elsewhere, err := pgrepl.SlotOfOtherDatabase(ctx, s.core.DB, legacy)
	if err != nil {
		return err
	}
	if elsewhere {
		return nil // another database's outbox of the same table name (in an older version)
	}
	st, err := pgrepl.ReadSlot(ctx, s.core.DB, legacy)
	if err != nil {
		return err
	}
	if st.ActivePID != 0 {
		s.core.Log.Warn("cdc: a relay of an earlier version streams this table's slot of before installations; stop it",
			"legacy_slot", legacy, "pid", st.ActivePID, "slot", s.slot)
		return nil
	}
	if st.Exists {
		if err := pgrepl.DropSlot(ctx, s.core.DB, legacy); err != nil {
			return err
		}
		s.core.Log.Warn("cdc: dropped this table's replication slot of an earlier version (named without the installation); "+
			"the new slot is created and the table drained", "legacy_slot", legacy, "slot", s.slot)
	}
	if err := s.retireLegacyPublication(ctx); err != nil {
		return err
	}
	if _, err := s.core.Store.SQL().CDC().ForgetSlot(legacy).Exec(ctx, s.core.DB); err != nil {
		return fmt.Errorf("cdc: forget slot %s: %w", legacy, err)
	}
	return nil
}

// retireLegacyPublication takes the table out of the publication named before installations
// existed, and drops that publication once it covers no table.
func (s *Source) retireLegacyPublication(ctx context.Context) error {
	pub, err := s.core.Store.Table.Publication("")
	if err != nil {
		return err
	}
	target, err := pgrepl.ResolveTable(ctx, s.core.DB, s.core.Store.Table.Events())
	if err != nil {
		return err
	}
	c, err := pgrepl.ReadPublication(ctx, s.core.DB, pub, target)
	if err != nil || !c.Exists {
		return err
	}
	if c.Covers {
		if err := pgrepl.DropTable(ctx, s.core.DB, pub, s.core.Store.Table.Events()); err != nil {
			return fmt.Errorf("cdc: take table %s out of publication %s: %w", target, pub, err)
		}
	}
	tables, err := pgrepl.PublicationTables(ctx, s.core.DB, pub)
	if err != nil || tables > 0 {
		return err
	}
	return pgrepl.DropPublication(ctx, s.core.DB, pub)
}
