package forwarder_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// newWALHarness is a PostgreSQL harness whose writer emits logical decoding messages
// (outbox.ModeWAL) and whose forwarders stream them (SourceWAL); the slot and its publication
// are dropped with the test, after the forwarders stopped.
func newWALHarness(t testing.TB, brokers []string) *harness {
	t.Helper()
	h := newHarness(t, outbox.Postgres, brokers)
	h.source = forwarder.SourceWAL
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: h.writer.Table().Events(), Mode: outbox.ModeWAL, WALSlot: slot})
	if err != nil {
		t.Fatal(err)
	}
	h.txWriter = w
	t.Cleanup(func() { dropWALSlot(t, h, slot) })
	return h
}

// dropWALSlot drops the slot and the publication of that name; a walsender that outlives its
// relay by a few milliseconds keeps the slot active, so the drop is retried for a while.
func dropWALSlot(t testing.TB, h *harness, slot string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := h.db.QueryRow("SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil || n == 0 {
			break
		}
		_, _ = h.db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		if _, err := h.db.Exec("SELECT pg_drop_replication_slot($1)", slot); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Errorf("drop slot %s: %v", slot, err)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, q := range []string{"DROP PUBLICATION IF EXISTS " + slot, "DROP TABLE IF EXISTS " + h.writer.Table().WALSlots()} {
		if _, err := h.db.Exec(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// walConfig is h.config with the wal source's settings: quick test timings on the test database.
func (h *harness) walConfig(pub message.Publisher) forwarder.Config {
	return h.config(pub)
}

// waitForWALStream waits until a walsender streams the slot (created by the relay at its first
// start): from then on, committed messages are the slot's. The slot is active while it is being
// created too, before its consistent point, and a transaction that began before that point is not
// decoded: so the walsender must have started streaming (pg_stat_replication's state).
func (h *harness) waitForWALStream(slot string) {
	h.t.Helper()
	// A bound against a hang; creating a slot waits for every transaction running then to end,
	// which on the shared test database may take a minute.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var active bool
		err := h.db.QueryRow("SELECT EXISTS (SELECT 1 FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid"+
			" WHERE s.slot_name = $1 AND r.state IN ('catchup', 'streaming'))", slot).Scan(&active)
		if err == nil && active {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no relay streams slot %s after 3 minutes (last error: %v)", slot, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rowsInserted is how many rows were ever inserted into the events table (pg_stat_user_tables,
// which PostgreSQL updates at the end of each transaction, with a short delay).
func (h *harness) rowsInserted() int64 {
	h.t.Helper()
	var n int64
	if _, err := h.db.Exec("SELECT pg_stat_clear_snapshot()"); err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.QueryRow("SELECT COALESCE((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = $1), -1)",
		h.writer.Table().Events()).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}
