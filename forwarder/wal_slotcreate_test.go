package forwarder_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALSlotCreatedByTheDeploymentStepStreams follows the documented deployment: the slot is
// created by outbox.CreateWALSlot (outboxkit wal-slot create, migrate --wal-slot) before any
// relay runs, events are written with business rows in the same transactions, and only then
// does the relay start. pgoutput looks the publication up as of the WAL it decodes, so unless
// the publication is older than the slot the relay cannot decode those transactions; every
// event must arrive.
func TestWALSlotCreatedByTheDeploymentStepStreams(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	ctx := context.Background()
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	business := testsupport.UniqueName("orders")
	if _, err := h.db.ExecContext(ctx, "CREATE TABLE "+business+" (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.db.Exec("DROP TABLE IF EXISTS " + business) })
	created, err := outbox.CreateWALSlot(ctx, h.db, h.writer.Table(), slot)
	if err != nil || !created {
		t.Fatalf("CreateWALSlot(%s) = %v, %v; want a created slot", slot, created, err)
	}

	keys := keysNamed("d", 5)
	for n := range 2 {
		for _, k := range keys {
			e := h.event(k, n)
			tx, err := h.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+business+" (id) VALUES ($1)", e.ID.String()); err != nil {
				t.Fatal(err)
			}
			if err := h.txWriter.WriteTx(ctx, tx, e); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.start(h.walConfig(h.publisher()))
	got := consumeDistinct(t, h.brokers, h.topic, 2*len(keys), 45*time.Second)
	dups := checkDelivery(t, got, keys, 2)
	t.Logf("%d events written after the deployment step created slot %s, all relayed (%d duplicates)", len(got)-dups, slot, dups)
}
