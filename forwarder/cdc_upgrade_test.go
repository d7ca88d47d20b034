package forwarder_test

import (
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestCDCRetiresTheSlotAndPublicationOfBeforeInstallations: a table whose relays of an earlier
// version made the slot obk_<table>_<hash of the group> and the publication outboxkit_<table>
// (both named without the installation), recorded in its slot table. A relay of this version
// streams its own slot and publication, drops the old slot (left alone, it would pin WAL
// forever), takes the table out of the old publication and drops it, and relays every event,
// those committed before it started included (the drain of a fresh slot).
func TestCDCRetiresTheSlotAndPublicationOfBeforeInstallations(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	table := h.writer.Table()
	legacySlot, err := table.Slot("", "default")
	if err != nil {
		t.Fatal(err)
	}
	legacyPub, err := table.Publication("")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE PUBLICATION " + legacyPub + " FOR TABLE " + table.Events() + " WITH (publish = 'insert')",
		"SELECT 1 FROM pg_create_logical_replication_slot('" + legacySlot + "', 'pgoutput')",
		"INSERT INTO " + table.CDCSlots() + " (slot_name, drained_at) VALUES ('" + legacySlot + "', now())",
	} {
		if _, err := h.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		_, _ = h.db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", legacySlot)
		_, _ = h.db.Exec("DROP PUBLICATION IF EXISTS " + legacyPub)
	})
	keys := keysNamed("u", 10)
	h.write(h.event(keys[0], 0)) // committed before the relay started: the drain relays it
	h.start(h.config(h.publisher()))
	h.waitForStream()
	for _, k := range keys[1:] {
		h.write(h.event(k, 0))
	}
	got := consume(t, h.brokers, h.topic, len(keys), 60*time.Second)
	checkDelivery(t, got, keys, 1)
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		var slots, pubs int
		if err := h.db.QueryRow("SELECT (SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = $1),"+
			" (SELECT COUNT(*) FROM pg_publication WHERE pubname = $2)", legacySlot, legacyPub).Scan(&slots, &pubs); err != nil {
			t.Fatal(err)
		}
		if slots == 0 && pubs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old slot (%d) or publication (%d) is still there", slots, pubs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if slot := testsupport.CDCSlot(t, h.db, table, "default"); slot == legacySlot {
		t.Fatalf("the slot is still named without the installation: %s", slot)
	}
}
