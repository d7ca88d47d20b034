package forwarder_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestWALDroppedPoolConnectionsKeepTheSession: the drain's queries (the release of due
// scheduled rows, the parked rows) use the relay's connection pool, not the stream's
// replication connection; when the pool's connections are cut while nothing is parked, a failed
// query is retried at the drain's next pass and the streaming session goes on: it is not
// restarted, which would stream again from the slot's confirmed position (duplicates). Each
// round cuts every pool connection of the relay, then waits for a scheduled event that only a
// successful release after the cut can publish.
func TestWALDroppedPoolConnectionsKeepTheSession(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	watch := newLockWaitWatch(t, h)
	cfg := h.walConfig(h.publisher())
	cfg.DB = watch.relayDB(0)
	var sessions atomic.Int64
	h.start(forwarder.WithWALHooks(cfg, &wal.Hooks{Streaming: func() { sessions.Add(1) }}))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))
	waitFor(t, time.Minute, "the first session streaming", func() bool { return sessions.Load() == 1 })

	const rounds = 3
	for i := range rounds {
		var cut int
		if err := h.db.QueryRow("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"+
			" WHERE application_name = $1 AND backend_type = 'client backend'", watch.apps[0]).Scan(&cut); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: terminated %d pool connections of the relay", i, cut)
		e := h.event("q", i)
		e.DeliverAt = dbClock(t, h.db, h.dialect).Add(100 * time.Millisecond)
		h.write(e)
		got := consumeDistinct(t, h.brokers, h.topic, i+1, time.Minute)
		checkDelivery(t, got, []string{"q"}, i+1)
	}
	if n := sessions.Load(); n != 1 {
		t.Errorf("%d streaming sessions, want 1: a failed query of the drain restarted the stream", n)
	}
}
