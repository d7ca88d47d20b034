package forwarder_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALRelayRefusesToStartOnALostSlot: the slot was created and registered (the deployment
// step), then dropped. A relay started on it returns at once with an error wrapping
// outbox.ErrWALSlotLost that names the slot and the way out (outboxkit wal-slot reset), instead
// of running and logging the error at every heartbeat; it does not re-create the slot.
func TestWALRelayRefusesToStartOnALostSlot(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	ctx := context.Background()
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	if _, err := outbox.CreateWALSlot(ctx, h.db, h.writer.Table(), slot); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		t.Fatal(err)
	}
	f, err := forwarder.New(h.walConfig(h.publisher()))
	if err != nil {
		t.Fatal(err)
	}
	// A bound against a hang, not a timing assertion: Run must return on its own.
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = f.Run(runCtx)
	if !errors.Is(err, outbox.ErrWALSlotLost) || !strings.Contains(err.Error(), `"`+slot+`"`) || !strings.Contains(err.Error(), "wal-slot reset") {
		t.Fatalf("Run on the dropped slot %s: %v; want an error wrapping ErrWALSlotLost naming the slot and wal-slot reset", slot, err)
	}
	var n int
	if err := h.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("slot %s re-created by the relay (%d slots, %v)", slot, n, err)
	}
	t.Logf("Run refused: %v", err)
}

// TestWALRelayExportsItsSlotMetrics: a wal relay given a registry (Config.Metrics, as the CLI's
// relay does) exports outboxkit_wal_slot_usable for its slot, which the OutboxWALSlotUnusable
// alert reads: 1 while the slot is usable, 0 once it is dropped.
func TestWALRelayExportsItsSlotMetrics(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	ctx := context.Background()
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	if _, err := outbox.CreateWALSlot(ctx, h.db, h.writer.Table(), slot); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := h.walConfig(h.publisher())
	cfg.Metrics = reg
	if _, err := forwarder.New(cfg); err != nil {
		t.Fatal(err)
	}
	usable := func() string {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range families {
			if mf.GetName() != "outboxkit_wal_slot_usable" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "slot" && l.GetValue() == slot {
						return fmt.Sprint(m.GetGauge().GetValue())
					}
				}
			}
		}
		return "absent"
	}
	if got := usable(); got != "1" {
		t.Fatalf("outboxkit_wal_slot_usable{slot=%q} = %s with the slot usable; want 1", slot, got)
	}
	if _, err := h.db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		t.Fatal(err)
	}
	if got := usable(); got != "0" {
		t.Fatalf("outboxkit_wal_slot_usable{slot=%q} = %s with the slot dropped; want 0", slot, got)
	}
}

// TestWALRelayRefusesASecondSlot: the writers' slot (created by the deployment step) is not the
// relay's. Run returns an error naming both at once, without retrying as if the database were
// not ready, and creates no second slot.
func TestWALRelayRefusesASecondSlot(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	ctx := context.Background()
	writers := testsupport.UniqueName("orders_wal")
	if _, err := outbox.CreateWALSlot(ctx, h.db, h.writer.Table(), writers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropWALSlot(t, h, writers) })
	var logs syncBuffer
	cfg := h.walConfig(h.publisher())
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second) // a bound against a hang
	defer cancel()
	err = f.Run(runCtx)
	relay := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	if err == nil || !strings.Contains(err.Error(), `"`+writers+`"`) || !strings.Contains(err.Error(), `"`+relay+`"`) {
		t.Fatalf("Run with slot %s registered and the relay on %s: %v; want an error naming both", writers, relay, err)
	}
	if strings.Contains(logs.String(), "database not ready") {
		t.Errorf("Run retried the second slot as a database not ready:\n%s", logs.String())
	}
}
