package forwarder_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// newCDCHarness is a PostgreSQL harness whose forwarders stream the table (SourceCDC); its
// publication, slots and slot table are dropped with the test.
func newCDCHarness(t testing.TB, brokers []string) *harness {
	t.Helper()
	h := newHarness(t, outbox.Postgres, brokers)
	h.source = forwarder.SourceCDC
	table := h.writer.Table()
	t.Cleanup(func() {
		// Runs after the forwarders stopped (cleanups run last-registered first).
		dropCDCObjects(t, h.db, table)
	})
	return h
}

func dropCDCObjects(t testing.TB, db *sql.DB, table outbox.Table) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix, err := table.Slot("")
	if err != nil {
		t.Error(err)
		return
	}
	prefix = prefix[:len(prefix)-8] // obk_<table>_
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "+
			"WHERE slot_name LIKE $1 || '%' AND NOT active", prefix)
		var left int
		if err == nil {
			err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%'", prefix).Scan(&left)
		}
		if err == nil && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("drop the test's replication slots %s*: %v (%d left)", prefix, err, left)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, q := range []string{"DROP PUBLICATION IF EXISTS " + table.Publication(), "DROP TABLE IF EXISTS " + table.CDCSlots()} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// cdcConfig is the CDC part of h.config: quick test timings on the test database.
func (h *harness) cdcConfig() forwarder.CDCConfig {
	if h.source != forwarder.SourceCDC {
		return forwarder.CDCConfig{}
	}
	return forwarder.CDCConfig{DSN: testsupport.PostgresDSN(h.t), StatusInterval: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond}
}

// waitForStream waits until a relay streams the table's slot of the default lease group and
// has drained what was committed before it: from then on, commits go through the WAL.
func (h *harness) waitForStream() { h.waitForStreamBy(0) }

// waitForStreamBy is waitForStream for a walsender other than the one with process id notPID
// (the previous streamer's, which may outlive its relay by a few milliseconds); it returns the
// process id of the walsender.
func (h *harness) waitForStreamBy(notPID int) int {
	h.t.Helper()
	slot, err := h.writer.Table().Slot("default")
	if err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var pid int
		err := h.db.QueryRow("SELECT COALESCE((SELECT s.active_pid FROM pg_replication_slots s JOIN "+h.writer.Table().CDCSlots()+
			" d ON d.slot_name = s.slot_name WHERE s.slot_name = $1 AND s.active AND d.drained_at IS NOT NULL), 0)", slot).Scan(&pid)
		if err == nil && pid != 0 && pid != notPID {
			return pid
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no relay streams slot %s after 60s (last error: %v)", slot, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeAndStart runs write and starts a forwarder with cfg: in that order on the polling source
// (a backlog), and the other way round on the cdc source, waiting for the stream first, so that
// the stream carries the events rather than the drain of a fresh slot (which
// TestCDCBacklogOnlyInTheTable covers).
func (h *harness) writeAndStart(cfg forwarder.Config, write func()) {
	h.t.Helper()
	if cfg.Source != forwarder.SourceCDC {
		write()
		h.start(cfg)
		return
	}
	h.start(cfg)
	h.waitForStream()
	write()
}
