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

// BenchmarkScheduledLateness writes 1,000 scheduled events a second for 10 s (100 keys, each due
// one second after it is written) while a polling relay with the default poll intervals runs
// (on PostgreSQL, MariaDB and SQLite, the real Kafka), and reports how late each was handed to
// the broker after its deliver_at, both read on the database's clock: p50, p99 and max in ms.
//
//	CI=true go test ./forwarder -run '^$' -bench ScheduledLateness -benchtime 1x
func BenchmarkScheduledLateness(b *testing.B) {
	brokers := testsupport.KafkaBrokers(b)
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		b.Run(string(d), func(b *testing.B) { benchScheduledLateness(b, d, brokers) })
	}
}

func benchScheduledLateness(b *testing.B, dialect outbox.Dialect, brokers []string) {
	for range b.N {
		h := newHarness(b, dialect, brokers)
		kafkaPub := h.publisher()
		pub := &clockedPublisher{OutcomePublisher: kafkaPub.(forwarder.OutcomePublisher), Publisher: kafkaPub,
			t: b, db: h.db, dialect: h.dialect, at: map[string]time.Time{}}
		cfg := h.config(pub)
		cfg.MinPollInterval, cfg.MaxPollInterval = 0, 0 // the defaults: 10 ms, 1 s
		h.start(cfg)
		const rate, seconds, perTick = 1000, 10, 10
		dbStart, start := dbClock(b, h.db, h.dialect), time.Now()
		var events []outbox.Event
		for tick := range rate * seconds / perTick {
			time.Sleep(time.Until(start.Add(time.Duration(tick) * perTick * time.Second / rate)))
			batch := make([]outbox.Event, perTick)
			for i := range batch {
				batch[i] = h.event(fmt.Sprintf("k%d", (tick*perTick+i)%100), tick*perTick+i)
				batch[i].DeliverAt = dbStart.Add(time.Since(start) + time.Second).Truncate(time.Microsecond)
			}
			h.write(batch...)
			events = append(events, batch...)
		}
		deadline := time.Now().Add(time.Minute)
		for h.rowsWithStatus(4)+h.rowsWithStatus(0) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		late := make([]float64, 0, len(events))
		for _, e := range events {
			at := pub.publishedAt(e.ID)
			if at.IsZero() {
				b.Fatalf("event %s was not published", e.ID)
			}
			late = append(late, float64(at.Sub(e.DeliverAt))/float64(time.Millisecond))
		}
		slices.Sort(late)
		b.ReportMetric(late[len(late)/2], "p50-late-ms")
		b.ReportMetric(late[len(late)*99/100], "p99-late-ms")
		b.ReportMetric(late[len(late)-1], "max-late-ms")
		b.ReportMetric(late[0], "min-late-ms")
	}
	b.ReportMetric(0, "ns/op")
}
