package forwarder_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkScheduledBurst drains 20,000 events of 1,000 keys that come due at the same moment,
// beside the same number of ordinary events committed at once, each into an idle polling relay
// (two workers, batches of 1,000) on PostgreSQL with the real Kafka. It reports events/s of
// each drain: the burst from the first release to the last row gone, the backlog from its
// commit to the last row gone (docs/scheduled.md).
//
//	CI=true go test ./forwarder -run '^$' -bench ScheduledBurst -benchtime 3x
func BenchmarkScheduledBurst(b *testing.B) {
	brokers := testsupport.KafkaBrokers(b)
	var burst, backlog []float64
	for range b.N {
		burst = append(burst, drainDue(b, newHarness(b, outbox.Postgres, brokers), true))
		backlog = append(backlog, drainDue(b, newHarness(b, outbox.Postgres, brokers), false))
	}
	b.ReportMetric(median(burst), "scheduled-burst-events/s")
	b.ReportMetric(median(backlog), "ordinary-backlog-events/s")
	b.ReportMetric(median(burst)/median(backlog), "burst/backlog")
	b.ReportMetric(0, "ns/op")
}

func drainDue(b *testing.B, h *harness, scheduled bool) float64 {
	b.Helper()
	const n, keys = 20000, 1000
	cfg := h.config(h.publisher())
	cfg.BatchSize, cfg.Workers = 1000, 2
	stop := h.start(cfg)
	defer stop()
	due := dbClock(b, h.db, h.dialect).Add(3 * time.Second)
	events := make([]outbox.Event, 0, n)
	for i := range n {
		e := h.event(fmt.Sprintf("k%d", i%keys), i)
		if scheduled {
			e.DeliverAt = due
		}
		events = append(events, e)
	}
	tx, err := h.db.BeginTx(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for s := 0; s < n; s += 5000 {
		if err := h.writer.WriteTx(context.Background(), tx, events[s:s+5000]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if scheduled {
		for h.rowsWithStatus(4) == n {
			time.Sleep(5 * time.Millisecond)
		}
		start = time.Now()
	}
	deadline := start.Add(2 * time.Minute)
	for h.rowsWithStatus(4)+h.rowsWithStatus(0) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d rows left after two minutes", h.rowsWithStatus(4)+h.rowsWithStatus(0))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n / time.Since(start).Seconds()
}
