package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALDroppedSlotUnderWrites: writers of the three kinds run while the registered slot is
// read and then dropped. Every event read from the slot is one whose transaction committed (no
// phantoms); every write begun after the drop fails, naming the slot, and leaves no business row;
// and the loss of what the slot had not delivered is said, not hidden: the slot reads as lost,
// and CreateWALSlot refuses to re-create it.
func TestWALDroppedSlotUnderWrites(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	dsn := testsupport.PostgresDSN(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walg"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()

	writers := startWALWriters(t, tg, dsn)
	writes := writers.until(t, committedOfEach(5))
	read := walEvents(t, slot.messages(t, tg.writer.Table().WALPrefix()))
	if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", slot.name); err != nil {
		t.Fatal(err)
	}
	writers.lossSeen.Store(true)
	writes = append(writes, writers.until(t, refusedAfterLossOfEach(3))...)
	writes = append(writes, writers.stop()...)

	checkRefusedAfterLoss(t, tg, writes, slot.name, "does not exist in this database")
	committed := map[string]bool{}
	for _, w := range writes {
		if w.err == nil {
			committed[w.id] = true
		}
	}
	for _, e := range read {
		if !committed[e.ID.String()] {
			t.Errorf("the slot delivered event %s, whose transaction did not commit", e.ID)
		}
	}
	t.Logf("the slot delivered %d events before it was dropped; %d committed in all", len(read), len(committed))
	checkSlotLost(ctx, t, tg, slot.name, "does not exist in this database")
}

// TestWALInvalidatedSlotUnderWrites: on a private cluster with max_slot_wal_keep_size (set on the
// shared server it would invalidate every other test's slots), writers run while the WAL grows
// past the limit until a checkpoint invalidates the unread slot. Every write begun after that
// fails, naming the slot and saying it is invalidated; the slot reads as lost; CreateWALSlot
// refuses it; ResetWALSlot replaces it, after which writes commit and reach the new slot.
func TestWALInvalidatedSlotUnderWrites(t *testing.T) {
	dsn := testsupport.PrivatePostgres(t, "max_slot_wal_keep_size=2MB")
	db := testsupport.OpenDSN(t, "pgx", dsn)
	tg := newWALTarget(t, db, "walg_orders")
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()

	writers := startWALWriters(t, tg, dsn)
	writes := writers.until(t, committedOfEach(5))
	for i := 0; ; i++ {
		st, err := outbox.ReadWALSlot(ctx, db, tg.writer.Table(), slot.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.WALStatus == "lost" {
			t.Logf("slot %s invalidated after %d rounds of 1 MB of WAL and a checkpoint", slot.name, i)
			break
		}
		if i == 100 {
			t.Fatalf("slot %s still %s after 100 MB of WAL and 100 checkpoints past max_slot_wal_keep_size=2MB", slot.name, st.WALStatus)
		}
		// About 1 MB of WAL (a non-transactional message of another prefix), a new segment and a
		// checkpoint, which invalidates slots holding WAL past the limit.
		if _, err := db.Exec("SELECT pg_logical_emit_message(false, 'filler', repeat('x', 1000000)), pg_switch_wal()"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
	}
	writers.lossSeen.Store(true)
	writes = append(writes, writers.until(t, refusedAfterLossOfEach(3))...)
	writes = append(writes, writers.stop()...)
	checkRefusedAfterLoss(t, tg, writes, slot.name, "is invalidated")
	checkSlotLost(ctx, t, tg, slot.name, "is invalidated")

	if err := outbox.ResetWALSlot(ctx, db, tg.writer.Table(), slot.name); err != nil {
		t.Fatalf("ResetWALSlot: %v", err)
	}
	if err := outbox.ResetWALSlot(ctx, db, tg.writer.Table(), slot.name); err == nil || !strings.Contains(err.Error(), "is usable") {
		t.Errorf("ResetWALSlot of the new, usable slot: want a refusal, got %v", err)
	}
	ev := walEvent("after-reset")
	if err := writeWAL(ctx, tg, nil, "database/sql WriteTx", ev); err != nil {
		t.Fatalf("write after the reset: %v", err)
	}
	got := walEvents(t, slot.messages(t, tg.writer.Table().WALPrefix()))
	if len(got) != 1 || got[0].ID != ev.ID {
		t.Errorf("the new slot delivered %d events, want the one written after the reset", len(got))
	}
}

// checkSlotLost: the slot reads as registered and lost, and CreateWALSlot refuses to re-create
// it with an error wrapping ErrWALSlotLost that names it and says why and what to do.
func checkSlotLost(ctx context.Context, t *testing.T, tg walTarget, slot, why string) {
	t.Helper()
	st, err := outbox.ReadWALSlot(ctx, tg.db, tg.writer.Table(), slot)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Lost() || st.Usable() {
		t.Errorf("slot %s after the loss: %+v, want registered and lost", slot, st)
	}
	created, err := outbox.CreateWALSlot(ctx, tg.db, tg.writer.Table(), slot)
	if created || !errors.Is(err, outbox.ErrWALSlotLost) {
		t.Fatalf("CreateWALSlot of a lost slot: created %v, %v; want no slot and ErrWALSlotLost", created, err)
	}
	for _, want := range []string{`"` + slot + `"`, why, "outboxkit wal-slot reset " + slot} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CreateWALSlot's error should contain %q: %v", want, err)
		}
	}
}
