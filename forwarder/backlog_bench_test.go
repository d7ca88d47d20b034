package forwarder_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkBacklogAfterIdle drains a backlog of 100,000 events (1,000 keys) that arrives at a
// relay which has been relaying a trickle on an empty table, as a relay deployed on a new
// outbox does until its first burst: its statements were prepared, and planned, on a table of a
// few pages. Beside it, the polling relay drains the same backlog started on the full table. It
// reports events/s of each drain and, for polling, after-idle ÷ fresh; autovacuum runs with
// PostgreSQL's defaults.
//
//	CI=true go test ./forwarder -run '^$' -bench BacklogAfterIdle -benchtime 3x
func BenchmarkBacklogAfterIdle(b *testing.B) {
	brokers := testsupport.KafkaBrokers(b)
	var afterIdle, fresh, cdc []float64
	for range b.N {
		afterIdle = append(afterIdle, drainBacklog(b, newHarness(b, outbox.Postgres, brokers), true))
		fresh = append(fresh, drainBacklog(b, newHarness(b, outbox.Postgres, brokers), false))
		cdc = append(cdc, drainBacklog(b, newCDCHarness(b, brokers), true))
	}
	b.ReportMetric(median(afterIdle), "polling-after-idle-events/s")
	b.ReportMetric(median(fresh), "polling-fresh-events/s")
	b.ReportMetric(median(afterIdle)/median(fresh), "polling-after-idle/fresh")
	b.ReportMetric(median(cdc), "cdc-after-idle-events/s")
	b.ReportMetric(0, "ns/op")
}

// drainBacklog runs a relay of h's source (two workers, batches of 1,000, 16 idle connections,
// as the CLI's relay keeps) and returns the events/s of a backlog of 100,000 events, committed in
// one transaction: after 400 single-event transactions relayed one by one when idleFirst (the
// clock starts at the backlog's commit), else before the relay starts (the clock starts with the
// relay, so its start, taking its leases, counts too).
func drainBacklog(b *testing.B, h *harness, idleFirst bool) float64 {
	b.Helper()
	const backlog, keys = 100000, 1000
	h.db.SetMaxIdleConns(16)
	cfg := h.config(h.publisher())
	cfg.BatchSize, cfg.Workers = 1000, 2
	events := make([]outbox.Event, 0, backlog)
	for i := range backlog {
		events = append(events, h.event(fmt.Sprintf("k%d", i%keys), i))
	}
	// one transaction, so that no relay drains any of it before the clock starts
	writeBacklog := func() {
		tx, err := h.db.BeginTx(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		for s := 0; s < backlog; s += 5000 {
			if err := h.writer.WriteTx(context.Background(), tx, events[s:s+5000]...); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	var start time.Time
	var stop func()
	if idleFirst {
		stop = h.start(cfg)
		if cfg.Source == forwarder.SourceCDC {
			h.waitForStream()
		}
		for i := range 400 {
			h.write(h.event(fmt.Sprintf("trickle-%d", i%50), i))
			time.Sleep(5 * time.Millisecond)
		}
		h.waitForDrained()
		writeBacklog()
		start = time.Now()
	} else {
		writeBacklog()
		start = time.Now()
		stop = h.start(cfg)
	}
	h.waitForDrained()
	elapsed := time.Since(start)
	stop()
	return backlog / elapsed.Seconds()
}

// waitForDrained waits until no row of h's table is pending (or fails after a minute).
func (h *harness) waitForDrained() {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for h.rowsWithStatus(0) > 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d rows still pending after a minute", h.rowsWithStatus(0))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
