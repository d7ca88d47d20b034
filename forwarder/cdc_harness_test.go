package forwarder_test

import (
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
		testsupport.DropCDCObjects(t, h.db, table)
	})
	return h
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
	return testsupport.WaitForCDCStream(h.t, h.db, h.writer.Table(), notPID)
}

// writeAndStart runs write and starts a forwarder with cfg: in that order on the polling source
// (a backlog), and the other way round on the cdc source, waiting for the stream first, so that
// the stream carries the events rather than the drain of a fresh slot (which
// TestCDCBacklogOnlyInTheTable covers). It returns the forwarder's stop function.
func (h *harness) writeAndStart(cfg forwarder.Config, write func()) (stop func()) {
	h.t.Helper()
	switch cfg.Source {
	case forwarder.SourceCDC:
		stop = h.start(cfg)
		h.waitForStream()
	case forwarder.SourceWAL:
		// The slot exists from the relay's first start: messages emitted before are refused.
		stop = h.start(cfg)
		h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))
	default:
		write()
		return h.start(cfg)
	}
	write()
	return stop
}
