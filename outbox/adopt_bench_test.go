package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkAdoptedWrite measures what adoption costs the team's writers: one seed-004 event per
// transaction into the team's table before adoption, into an adopted team's table (the copy and
// the any-writer trigger), and into outboxkit's table directly by plain SQL, written in turn each
// iteration so the three see the same machine noise. It reports the time per transaction of
// each, on each database.
func BenchmarkAdoptedWrite(b *testing.B) {
	for _, d := range adoptDialects {
		b.Run(string(d), func(b *testing.B) { benchmarkAdoptedWrite(b, d) })
	}
}

func benchmarkAdoptedWrite(b *testing.B, d outbox.Dialect) {
	plain, adopted := newAdoptedTable(b, d), newAdoptedTable(b, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, adopted.db, adopted.relay, adopted.cfg); err != nil {
		b.Fatal(err)
	}
	payload := `convert_to('{"orderId": "o"}', 'UTF8')`
	if d == outbox.MySQL {
		payload = `'{"orderId": "o"}'`
	}
	direct := adopted.q("INSERT INTO " + adopted.relay.Events() + " (topic, aggregate_type, aggregate_id, event_type, payload, headers)" +
		" VALUES ('order.events', 'Order', ?, 'OrderCreated', " + payload + `, '{"source": "order-service"}')`)
	var took [3]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		key := "o-" + string(rune('a'+i%26))
		for j, write := range []func() error{
			func() error { _, err := plain.insert(ctx, plain.db, "Order", key, i); return err },
			func() error { _, err := adopted.insert(ctx, adopted.db, "Order", key, i); return err },
			func() error { _, err := adopted.db.ExecContext(ctx, direct, key); return err },
		} {
			start := time.Now()
			if err := write(); err != nil {
				b.Fatal(err)
			}
			took[j] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Microseconds())/n, "µs/tx-unadopted")
	b.ReportMetric(float64(took[1].Microseconds())/n, "µs/tx-adopted")
	b.ReportMetric(float64(took[2].Microseconds())/n, "µs/tx-outboxkit-table")
}
